package domain

import (
	"encoding/json"
	"regexp"
)

// Limits bounds stored payloads (config limits.*).
type Limits struct {
	ContextBytes int
	ResultBytes  int
}

// TypePattern is what a request type must match (docs/reference.md §3); errors quote it.
const TypePattern = `^[a-z0-9][a-z0-9._-]{0,63}$`

var typePattern = regexp.MustCompile(TypePattern)

// ValidType reports whether t is a valid request type.
func ValidType(t string) bool { return typePattern.MatchString(t) }

// CreateInput is a validated create body.
type CreateInput struct {
	Type    string
	Context json.RawMessage // compact JSON object, or nil
	// Labels are fixed at create; "" for none.
	Labels Labels
	// EstimatedDurationSeconds is 0 when not given.
	EstimatedDurationSeconds int
}

// ProgressInput is a validated processing body; Progress is nil for a bare heartbeat.
type ProgressInput struct {
	Progress json.RawMessage
}

// CompleteInput is a validated complete body.
type CompleteInput struct {
	ResultType string
	Result     json.RawMessage // compact JSON object
}

// FailInput is a validated fail body, already encoded as the failure member.
type FailInput struct {
	Failure json.RawMessage
}

// CancelInput is a validated cancel body; Reason may be empty.
type CancelInput struct {
	Reason string
}

// Result types of complete.
const (
	ResultLink         = "link"
	ResultConfirmation = "confirmation"
	ResultAnswer       = "answer"
)

// FailureJSON encodes the failure member.
func FailureJSON(code, reason string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Code   string `json:"code"`
		Reason string `json:"reason,omitempty"`
	}{code, reason})
	return b
}
