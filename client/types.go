package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// Status is a request's status.
type Status string

// The statuses of a request. The last four are terminal.
const (
	StatusQueued     Status = "queued"
	StatusProcessing Status = "processing"
	StatusSucceeded  Status = "succeeded"
	StatusFailed     Status = "failed"
	StatusCancelled  Status = "cancelled"
	StatusExpired    Status = "expired"
)

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusCancelled, StatusExpired:
		return true
	}
	return false
}

// Request is the representation of one request (docs/reference.md §3). Optional members
// the service omits are nil or empty here.
type Request struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Status Status `json:"status"`
	// Done is true exactly when Status is terminal.
	Done bool `json:"done"`
	// Progress is the last progress reported, nil before any.
	Progress *Progress `json:"progress,omitempty"`
	// Context is the JSON object given at create, nil if none.
	Context json.RawMessage `json:"context,omitempty"`
	// Labels are the labels given at create, nil if none.
	Labels map[string]string `json:"labels,omitempty"`
	// ResultType ("link", "confirmation", "answer") and Result are set when
	// succeeded; read Result with Link, Confirmation or DecodeAnswer.
	ResultType string          `json:"result_type,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	// Failure is set when failed or expired.
	Failure *Failure `json:"failure,omitempty"`
	// Cancellation is set when cancelled with a reason.
	Cancellation *Cancellation `json:"cancellation,omitempty"`
	// CreatedBy is the public id of the API key that created the request.
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// CompletedAt is set once terminal; ExpiresAt when retention will delete
	// the record (nil while not terminal, or when it is kept forever).
	CompletedAt *time.Time `json:"completed_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	// Version starts at 1 and grows with every accepted transition and heartbeat.
	Version int64 `json:"version"`

	raw json.RawMessage
}

// UnmarshalJSON keeps the bytes as received for Raw.
func (r *Request) UnmarshalJSON(b []byte) error {
	type plain Request
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = Request(p)
	r.raw = append(json.RawMessage(nil), b...)
	return nil
}

// Raw returns the representation exactly as the service sent it (nil for a
// Request not read from the service).
func (r *Request) Raw() json.RawMessage { return r.raw }

// Link decodes a "link" result.
func (r *Request) Link() (*Link, error) {
	var l Link
	if err := r.decodeResult("link", &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Confirmation decodes a "confirmation" result.
func (r *Request) Confirmation() (*Confirmation, error) {
	var c Confirmation
	if err := r.decodeResult("confirmation", &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// DecodeAnswer decodes an "answer" result into v.
func (r *Request) DecodeAnswer(v any) error { return r.decodeResult("answer", v) }

func (r *Request) decodeResult(typ string, v any) error {
	if r.ResultType != typ {
		return fmt.Errorf("request %s: result_type is %q, not %q", r.ID, r.ResultType, typ)
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		return fmt.Errorf("request %s: decode %s result: %w", r.ID, typ, err)
	}
	return nil
}

// Progress is a processing request's progress. Either member may be absent.
type Progress struct {
	// Percent is 0..100, nil when only a message was reported.
	Percent *int `json:"percent,omitempty"`
	// Message is at most 256 characters.
	Message string `json:"message,omitempty"`
}

// NewProgress returns a progress of percent (0..100) with a message.
func NewProgress(percent int, message string) *Progress {
	return &Progress{Percent: &percent, Message: message}
}

// Failure is why a request failed or expired. It is also an error: a job
// function (RunJob) returns one to fail its request with this code.
type Failure struct {
	// Code matches ^[A-Z][A-Z0-9_]{0,63}$ (ERR_JOB_EXECUTION_TIMED_OUT and
	// REQUEST_EXPIRED are the service's own).
	Code string `json:"code"`
	// Reason is at most 1024 characters.
	Reason string `json:"reason,omitempty"`
}

func (f *Failure) Error() string {
	if f.Reason == "" {
		return f.Code
	}
	return f.Code + ": " + f.Reason
}

// Cancellation is the reason given to a cancel.
type Cancellation struct {
	Reason string `json:"reason,omitempty"`
}

// Result is what Complete records: a *Link, a *Confirmation or an *Answer.
type Result interface {
	// ResultType is the result_type it is sent as.
	ResultType() string
}

// Link is a "link" result: where to fetch the output.
type Link struct {
	// URL is absolute http or https, at most 2048 characters.
	URL string `json:"url"`
	// ExpiresAt is when the link stops working.
	ExpiresAt time.Time `json:"expires_at"`
	// ChecksumSHA256 is 64 hex digits, optional.
	ChecksumSHA256 string `json:"checksum_sha256,omitempty"`
	// SizeBytes and ContentType are optional.
	SizeBytes   *int64 `json:"size_bytes,omitempty"`
	ContentType string `json:"content_type,omitempty"`
}

// ResultType is "link".
func (*Link) ResultType() string { return "link" }

// Confirmation is a "confirmation" result: the work was, or was not, done.
type Confirmation struct {
	Confirmed bool `json:"confirmed"`
	// Message is optional, at most 1024 characters.
	Message string `json:"message,omitempty"`
}

// ResultType is "confirmation".
func (*Confirmation) ResultType() string { return "confirmation" }

// Answer is an "answer" result: Value is encoded as a JSON object of at most
// limits.result_bytes (16 KiB by default).
type Answer struct {
	Value any
}

// ResultType is "answer".
func (*Answer) ResultType() string { return "answer" }

// MarshalJSON encodes Value.
func (a *Answer) MarshalJSON() ([]byte, error) { return json.Marshal(a.Value) }

// Event is one status change of a request.
type Event struct {
	Seq int       `json:"seq"`
	At  time.Time `json:"at"`
	// From is nil for the creation.
	From *Status `json:"from"`
	To   Status  `json:"to"`
	// By is the key id that made the change, or "system" for timeouts.
	By string `json:"by"`
}

// Created is the answer to Create.
type Created struct {
	Request
	// PollToken lets anyone who holds it read this one request (WithPollToken);
	// give it to the client that will poll.
	PollToken string `json:"poll_token"`
	// Location is the absolute URL of the request.
	Location string `json:"-"`
	// RetryAfter is when the service suggests the first poll
	// (pass it to WaitOptions.RetryAfter).
	RetryAfter time.Duration `json:"-"`
}

// Page is one page of a listing.
type Page struct {
	Items []*Request `json:"items"`
	// NextCursor continues the listing; empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// WebhookEvent names a change a webhook endpoint can subscribe to.
type WebhookEvent string

// The webhook event types.
const (
	EventCreated    WebhookEvent = "request.created"
	EventProcessing WebhookEvent = "request.processing"
	EventSucceeded  WebhookEvent = "request.succeeded"
	EventFailed     WebhookEvent = "request.failed"
	EventCancelled  WebhookEvent = "request.cancelled"
	EventExpired    WebhookEvent = "request.expired"
)

// Webhook is a registered webhook endpoint.
type Webhook struct {
	ID          string         `json:"id"`
	URL         string         `json:"url"`
	Events      []WebhookEvent `json:"events"`
	Description string         `json:"description"`
	CreatedAt   time.Time      `json:"created_at"`
	// Secret ("whsec_...") signs the deliveries; only RegisterWebhook returns it.
	Secret string `json:"secret,omitempty"`
}

// Delivery is one delivery attempt of a webhook message.
type Delivery struct {
	MessageID string       `json:"message_id"`
	EventType WebhookEvent `json:"event_type"`
	RequestID string       `json:"request_id"`
	// Attempt is 1 for the first try.
	Attempt int `json:"attempt"`
	// State is "delivered", "retrying" or "failed".
	State string `json:"state"`
	// HTTPStatus is the receiver's answer, nil when none came (Error says why).
	HTTPStatus    *int       `json:"http_status"`
	Error         string     `json:"error,omitempty"`
	At            time.Time  `json:"at"`
	DurationMs    int64      `json:"duration_ms"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
}
