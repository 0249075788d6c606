package domain

import (
	"errors"
	"fmt"
)

// Code is a stable machine-readable error code (docs/reference.md §7).
type Code string

const (
	Unauthenticated      Code = "UNAUTHENTICATED"
	Forbidden            Code = "FORBIDDEN"
	TenantFrozen         Code = "TENANT_FROZEN"
	NotFound             Code = "NOT_FOUND"
	MethodNotAllowed     Code = "METHOD_NOT_ALLOWED"
	ValidationFailed     Code = "VALIDATION_FAILED"
	InvalidCursor        Code = "INVALID_CURSOR"
	AlreadyTerminal      Code = "ASYNC_REQUEST_ALREADY_TERMINAL"
	PayloadTooLarge      Code = "PAYLOAD_TOO_LARGE"
	UnsupportedMediaType Code = "UNSUPPORTED_MEDIA_TYPE"
	NotAcceptable        Code = "NOT_ACCEPTABLE"
	IdempotencyKeyReused Code = "IDEMPOTENCY_KEY_REUSED"
	PolledTooEarly       Code = "POLLED_TOO_EARLY"
	RateLimited          Code = "RATE_LIMITED"
	BackendUnavailable   Code = "BACKEND_UNAVAILABLE"
	Internal             Code = "INTERNAL"
)

// FieldError names one invalid input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is the one error type that crosses package boundaries. Its Message is safe
// to show to callers; anything else (a Redis error, say) is wrapped as Internal or
// BackendUnavailable and never shown.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
	// Request is the current representation, for ASYNC_REQUEST_ALREADY_TERMINAL.
	Request *Request
	// RetryAfterSeconds, for POLLED_TOO_EARLY, RATE_LIMITED and BACKEND_UNAVAILABLE.
	RetryAfterSeconds int
	// Err is the cause, for logs only.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error with a formatted, caller-safe message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the Code of err, Internal for any other error, "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// ErrNotFound is the single answer for every id a caller may not see; callers must
// not be able to tell unknown, foreign, expired and deleted apart.
func ErrNotFound() *Error {
	return Errorf(NotFound, "The request does not exist or you may not see it.")
}
