package domain

import (
	"encoding/json"
	"errors"
	"time"
)

// Status of a request. The last four are terminal: they never change again.
type Status string

const (
	StatusQueued     Status = "queued"
	StatusProcessing Status = "processing"
	StatusSucceeded  Status = "succeeded"
	StatusFailed     Status = "failed"
	StatusCancelled  Status = "cancelled"
	StatusExpired    Status = "expired"
)

// Statuses lists every status, in lifecycle order.
var Statuses = [...]Status{StatusQueued, StatusProcessing, StatusSucceeded, StatusFailed, StatusCancelled, StatusExpired}

// Terminal reports whether s is one of the final statuses.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusCancelled, StatusExpired:
		return true
	}
	return false
}

// CanBecome reports whether a request in status s may move to status to: the
// lifecycle of docs/reference.md §3 and §4, which the transition script enforces in Redis
// (scripts/lua/transition.lua; TestTransitionRule in internal/store holds the
// two to the same answers). Queued is never a target: only a create makes a
// queued request. From queued or processing, a request may go to processing
// (processing to processing is a heartbeat), to succeeded, failed or cancelled
// (complete, fail, cancel, or failed by the processing timeout); expired
// follows queued only (the queued timeout). Terminal statuses never change.
func (s Status) CanBecome(to Status) bool {
	switch {
	case s != StatusQueued && s != StatusProcessing:
		return false
	case to == StatusExpired:
		return s == StatusQueued
	}
	return to == StatusProcessing || to == StatusSucceeded || to == StatusFailed || to == StatusCancelled
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, x := range Statuses {
		if x == s {
			return true
		}
	}
	return false
}

// Request is the representation of one long-running unit of work (docs/reference.md §3).
// Optional members are omitted when absent (never null), except completed_at and
// expires_at, which are always present and null until they apply: a client can
// then test them without checking for presence first.
type Request struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Status      Status          `json:"status"`
	Done        bool            `json:"done"`
	Progress    json.RawMessage `json:"progress,omitempty"`
	Context     json.RawMessage `json:"context,omitempty"`
	Labels      Labels          `json:"labels,omitempty"`
	ResultType  string          `json:"result_type,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Failure     json.RawMessage `json:"failure,omitempty"`
	CreatedBy   string          `json:"created_by"`
	CreatedAt   Time            `json:"created_at"`
	UpdatedAt   Time            `json:"updated_at"`
	CompletedAt *Time           `json:"completed_at"`
	ExpiresAt   *Time           `json:"expires_at"`
	Version     int64           `json:"version"`
	// Events are the status changes, oldest first; served by the events route only.
	Events []Event `json:"-"`
	// Cancellation carries the reason given to cancel, when one was given.
	Cancellation json.RawMessage `json:"cancellation,omitempty"`
	// PollToken is set only on the create answer (and its idempotent replays).
	PollToken string `json:"poll_token,omitempty"`
	// TraceContext is the create's kept trace context (docs/reference.md §17),
	// "" when it was not traced: never part of the representation.
	TraceContext string `json:"-"`
}

// Event is one status change of a request.
type Event struct {
	Seq  int     `json:"seq"`
	At   Time    `json:"at"`
	From *Status `json:"from"`
	To   Status  `json:"to"`
	By   string  `json:"by"`
}

// Time marshals as RFC 3339 in UTC with exactly millisecond precision.
type Time struct{ time.Time }

// TimeLayout is the wire format of every time.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON writes the time in TimeLayout.
func (t Time) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(TimeLayout)+2)
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimeLayout)
	return append(b, '"'), nil
}

// UnmarshalJSON reads any RFC 3339 time.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v.UTC()
	return nil
}

// TimeMs converts Unix milliseconds to a Time.
func TimeMs(ms int64) Time { return Time{time.UnixMilli(ms).UTC()} }

// Principal is who calls: the tenant and credential taken from the Authorization
// header or poll token, never from the URL or body.
type Principal struct {
	Tenant string
	KeyID  string // public id of the API key; "" for a poll token
	Scopes Scopes
	// PollTokenFor is the request id a poll token grants (only set for poll tokens).
	PollTokenFor string
}

// Scopes is a set of API key scopes.
type Scopes uint8

const (
	ScopeRead Scopes = 1 << iota
	ScopeWrite
	ScopeAdmin
)

// Has reports whether every scope of want is in s.
func (s Scopes) Has(want Scopes) bool { return s&want == want }

// String lists the scopes comma-separated in a fixed order.
func (s Scopes) String() string {
	out := ""
	for _, x := range []struct {
		s Scopes
		n string
	}{{ScopeRead, "read"}, {ScopeWrite, "write"}, {ScopeAdmin, "admin"}} {
		if s.Has(x.s) {
			if out != "" {
				out += ","
			}
			out += x.n
		}
	}
	return out
}

// ParseScopes reads "read,write,admin".
func ParseScopes(v string) (Scopes, error) {
	var s Scopes
	start := 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) && v[i] != ',' {
			continue
		}
		switch v[start:i] {
		case "read":
			s |= ScopeRead
		case "write":
			s |= ScopeWrite
		case "admin":
			s |= ScopeAdmin
		default:
			return 0, Errorf(ValidationFailed, "unknown scope %q (want read, write or admin)", v[start:i])
		}
		start = i + 1
	}
	if s == 0 {
		return 0, Errorf(ValidationFailed, "no scope given")
	}
	return s, nil
}

// APIKey is the stored description of an API key. The secret itself is never kept:
// only its SHA-256 digest.
type APIKey struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Scopes    Scopes    `json:"-"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Digest    [32]byte  `json:"-"`
	// Operator marks an operator key (docs/reference.md §14): valid only on the console, for
	// every tenant; Tenant is empty and Scopes zero.
	Operator bool `json:"operator,omitempty"`
}

// IdempotencyKey is a client's Idempotency-Key, already normalised (quotes removed).
type IdempotencyKey string

// CreateParams describe a create call; Call.By is the request's created_by.
type CreateParams struct {
	Call
	Input   CreateInput
	IdemKey IdempotencyKey // "" when absent
}

// TransitionParams name the request and caller of a transition (or a delete).
type TransitionParams struct {
	Call
	ID      string
	IdemKey IdempotencyKey
}

// PollParams name a poll: who reads which request.
type PollParams struct {
	Call
	ID string
	// Caller is the pacing identity: the API key id, PollTokenCaller, or
	// Unpaced for a read that is no caller's poll.
	Caller string
}

// Pacing identities other than an API key id (PollParams.Caller).
const (
	// PollTokenCaller paces every holder of a request's poll token as one
	// caller: the token is the request's, not a person's. It cannot be taken
	// for a key id, which always starts with "key_".
	PollTokenCaller = "t"
	// Unpaced reads a request without pacing anyone: the events route, the
	// console, the read behind an idempotent replay or a long poll's final read.
	// Such a read neither answers POLLED_TOO_EARLY nor advances a schedule.
	Unpaced = ""
)

// PollResult is a poll's answer (what it counted goes to PollParams.Rate).
type PollResult struct {
	Request    *Request
	RetryAfter int // seconds; 0 for terminal requests
}

// Snapshot is a fresh read of a watched request (Watch). Err is set when the read
// failed: a NOT_FOUND error when the request is gone (deleted, past retention),
// BACKEND_UNAVAILABLE when Redis was away. Seq orders the reads of one Watch:
// a snapshot answers every Refresh that returned a number <= its Seq.
type Snapshot struct {
	Request *Request
	Err     error
	Seq     uint64
}

// Watch follows one request: once it is returned, every change accepted by any
// replica is followed by a Snapshot on Changes, read from the store after the
// change (never taken from the announcement). Changes keeps only the newest
// snapshot: a slow reader sees the latest state, never a queue. Refresh asks
// for a read made after the call, and returns the Seq that answers it. Close
// releases the watch; it is safe to call more than once.
type Watch interface {
	Changes() <-chan Snapshot
	Refresh() uint64
	Close()
}

// FinalRead is the read a waiter makes when its time is up: a read started
// after the call (so that a change whose announcement was lost is still
// seen), waited for at most timeout (then BACKEND_UNAVAILABLE).
func FinalRead(wa Watch, timeout time.Duration) Snapshot {
	want := wa.Refresh()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case snap := <-wa.Changes():
			if snap.Seq >= want {
				return snap
			}
		case <-t.C:
			return Snapshot{Err: &Error{Code: BackendUnavailable, Message: "The status store is unavailable; retry later.",
				RetryAfterSeconds: 1, Err: errors.New("final read of a wait not answered in time")}, Seq: want}
		}
	}
}
