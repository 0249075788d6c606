package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Problem codes of the service (docs/reference.md §7): the Code of an *Error.
const (
	CodeUnauthenticated      = "UNAUTHENTICATED"
	CodeForbidden            = "FORBIDDEN"
	CodeTenantFrozen         = "TENANT_FROZEN"
	CodeNotFound             = "NOT_FOUND"
	CodeMethodNotAllowed     = "METHOD_NOT_ALLOWED"
	CodeValidationFailed     = "VALIDATION_FAILED"
	CodeInvalidCursor        = "INVALID_CURSOR"
	CodeAlreadyTerminal      = "ASYNC_REQUEST_ALREADY_TERMINAL"
	CodePayloadTooLarge      = "PAYLOAD_TOO_LARGE"
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	CodeIdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED"
	CodePolledTooEarly       = "POLLED_TOO_EARLY"
	CodeRateLimited          = "RATE_LIMITED"
	CodeBackendUnavailable   = "BACKEND_UNAVAILABLE"
)

// Error is an answer of the service that is not a success: an RFC 9457
// problem. Answers that are not problem+json (a proxy's 502 page) become an
// Error with the HTTP status, an empty Code and the start of the body as Detail.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Code is the problem's stable code, one of the Code... constants.
	Code string
	// Title and Detail are the problem's human-readable summary and explanation.
	Title, Detail string
	// Type and Instance are the problem's type URI and the path it is about.
	Type, Instance string
	// RequestID identifies the call in the service's logs (the problem's
	// request_id, not a request's id).
	RequestID string
	// Fields lists what was wrong with the input (VALIDATION_FAILED).
	Fields []FieldError
	// Request is the request as it is now, for ASYNC_REQUEST_ALREADY_TERMINAL.
	Request *Request
	// RetryAfter is the answer's Retry-After (429, 503), zero when absent.
	RetryAfter time.Duration
}

// FieldError is one invalid input field of a VALIDATION_FAILED problem.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "asyncstatus: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" (request_id " + e.RequestID + ")")
	}
	return b.String()
}

// Is makes errors.Is(err, ErrNotFound) and the other sentinels work.
func (e *Error) Is(target error) bool {
	s, ok := target.(*sentinel)
	if !ok {
		return false
	}
	for _, c := range s.codes {
		if c == e.Code {
			return true
		}
	}
	return s.status != 0 && s.status == e.Status && e.Code == ""
}

// sentinel is an error value that matches *Error by code.
type sentinel struct {
	msg    string
	codes  []string
	status int // matches a non-problem answer of this status too
}

func (s *sentinel) Error() string { return s.msg }

// Sentinels to compare errors with errors.Is. Each matches the *Error of the
// codes it names.
var (
	// ErrUnauthenticated: 401 UNAUTHENTICATED, a missing, unknown or revoked credential.
	ErrUnauthenticated error = &sentinel{"asyncstatus: unauthenticated", []string{CodeUnauthenticated}, 401}
	// ErrForbidden: 403 FORBIDDEN, the key lacks the scope.
	ErrForbidden error = &sentinel{"asyncstatus: forbidden", []string{CodeForbidden}, 0}
	// ErrTenantFrozen: 403 TENANT_FROZEN, reads and creates of a frozen tenant.
	ErrTenantFrozen error = &sentinel{"asyncstatus: tenant frozen", []string{CodeTenantFrozen}, 0}
	// ErrNotFound: 404 NOT_FOUND, a request or webhook that this caller may not see.
	ErrNotFound error = &sentinel{"asyncstatus: not found", []string{CodeNotFound}, 404}
	// ErrValidation: 400 VALIDATION_FAILED; Error.Fields says what.
	ErrValidation error = &sentinel{"asyncstatus: validation failed", []string{CodeValidationFailed}, 0}
	// ErrInvalidCursor: 400 INVALID_CURSOR, a garbled cursor or one used with other filters.
	ErrInvalidCursor error = &sentinel{"asyncstatus: invalid cursor", []string{CodeInvalidCursor}, 0}
	// ErrAlreadyTerminal: 409 ASYNC_REQUEST_ALREADY_TERMINAL; Error.Request is the request as it is.
	ErrAlreadyTerminal error = &sentinel{"asyncstatus: request already terminal", []string{CodeAlreadyTerminal}, 0}
	// ErrPayloadTooLarge: 413 PAYLOAD_TOO_LARGE.
	ErrPayloadTooLarge error = &sentinel{"asyncstatus: payload too large", []string{CodePayloadTooLarge}, 413}
	// ErrIdempotencyKeyReused: 422 IDEMPOTENCY_KEY_REUSED, the key came with another body.
	ErrIdempotencyKeyReused error = &sentinel{"asyncstatus: idempotency key reused", []string{CodeIdempotencyKeyReused}, 0}
	// ErrRateLimited: 429 of either code, RATE_LIMITED or POLLED_TOO_EARLY; Error.RetryAfter says when to come back.
	ErrRateLimited error = &sentinel{"asyncstatus: rate limited", []string{CodeRateLimited, CodePolledTooEarly}, 429}
	// ErrPolledTooEarly: 429 POLLED_TOO_EARLY only.
	ErrPolledTooEarly error = &sentinel{"asyncstatus: polled too early", []string{CodePolledTooEarly}, 0}
	// ErrBackendUnavailable: 503 BACKEND_UNAVAILABLE, or any 503 that is not a problem.
	ErrBackendUnavailable error = &sentinel{"asyncstatus: backend unavailable", []string{CodeBackendUnavailable}, 503}
)

// problem is the body of a problem+json answer.
type problem struct {
	Type      string          `json:"type"`
	Title     string          `json:"title"`
	Status    int             `json:"status"`
	Detail    string          `json:"detail"`
	Instance  string          `json:"instance"`
	Code      string          `json:"code"`
	RequestID string          `json:"request_id"`
	Errors    []FieldError    `json:"errors"`
	Request   json.RawMessage `json:"request"`
}

// problemError makes the *Error of a failed answer.
func problemError(res *http.Response, body []byte) *Error {
	e := &Error{Status: res.StatusCode}
	e.RetryAfter, _ = retryAfter(res.Header)
	var p problem
	if err := json.Unmarshal(body, &p); err != nil || p.Code == "" {
		d := strings.TrimSpace(string(body))
		if len(d) > 200 {
			d = d[:200] + "..."
		}
		if d == "" {
			d = http.StatusText(res.StatusCode)
		}
		e.Detail = d
		return e
	}
	e.Code, e.Title, e.Detail, e.Type, e.Instance, e.RequestID, e.Fields =
		p.Code, p.Title, p.Detail, p.Type, p.Instance, p.RequestID, p.Errors
	if len(p.Request) > 0 && string(p.Request) != "null" {
		var r Request
		if json.Unmarshal(p.Request, &r) == nil {
			e.Request = &r
		}
	}
	return e
}
