package domain

// Audit trail (docs/operations.md, Audit trail): one line per create,
// transition, heartbeat and delete, handed to a sink that keeps it for longer
// than the records live.

// Audit event types: the webhook event names of the status entered, and two
// that webhooks do not send.
const (
	AuditHeartbeat = "request.heartbeat" // processing -> processing (progress or not)
	AuditDeleted   = "request.deleted"   // DELETE /v1/requests/{id}
	// AuditDropped is the line that reports events not recorded because a
	// tenant's audit backlog was at its bound (audit.max_backlog).
	AuditDropped = "audit.dropped"
)

// AuditEvent is one line of the audit trail. Its members are the only ones a
// line ever has: no context, result, progress, reason, token or key can reach
// it, because it has nowhere to hold them.
type AuditEvent struct {
	// EventID is "evt_<request id>_<version>": the same on every redelivery,
	// so consumers de-duplicate on it.
	EventID   string `json:"event_id"`
	Tenant    string `json:"tenant"`
	RequestID string `json:"request_id"`
	// RequestType is the request's type (statement.export).
	RequestType string `json:"request_type"`
	// Type is the event: request.created, request.processing, request.heartbeat,
	// request.succeeded, request.failed, request.cancelled, request.expired,
	// request.deleted.
	Type string `json:"type"`
	// Seq is the seq of the status event in GET /v1/requests/{id}/events (1
	// created, then each status change); a heartbeat carries the seq of the
	// processing event it belongs to, a delete the seq after the last.
	Seq int `json:"seq"`
	// From and To are statuses; From is nil on creation, To on delete.
	From *Status `json:"from"`
	To   *Status `json:"to"`
	// By is the API key id that made the change, or "system" (the sweeper's
	// timeouts); empty for a delete made without a known actor.
	By string `json:"by"`
	At Time   `json:"at"`
	// Version is the request's version after the change (a delete: one past
	// the last). Versions of one request run 1, 2, 3, ... without a gap.
	Version int64 `json:"version"`
	// FailureCode is the failure's code for request.failed and request.expired.
	FailureCode string `json:"failure_code,omitempty"`

	// Entry is where the event waits in the store (its stream entry), for the
	// acknowledgement after the sink wrote it.
	Entry string `json:"-"`
}

// AuditBacklog is what waits for the audit sink in one shard's stream.
type AuditBacklog struct {
	Tenant ShardName
	// Waiting entries (written by the scripts, not yet acknowledged).
	Waiting int64
	// Dropped events not recorded because Waiting was at the bound, not yet
	// reported to the sink.
	Dropped int64
}
