package domain

import "time"

// WebhookEvent is the type of a webhook message (docs/reference.md §10).
type WebhookEvent string

const (
	EventCreated    WebhookEvent = "request.created"
	EventProcessing WebhookEvent = "request.processing"
	EventSucceeded  WebhookEvent = "request.succeeded"
	EventFailed     WebhookEvent = "request.failed"
	EventCancelled  WebhookEvent = "request.cancelled"
	EventExpired    WebhookEvent = "request.expired"
)

// WebhookEvents lists every event type in lifecycle order.
var WebhookEvents = [...]WebhookEvent{EventCreated, EventProcessing, EventSucceeded, EventFailed, EventCancelled, EventExpired}

// DefaultWebhookEvents are the events of an endpoint registered without "events":
// the four terminal ones.
var DefaultWebhookEvents = []WebhookEvent{EventSucceeded, EventFailed, EventCancelled, EventExpired}

// EventFor is the event a request entering status s emits: created for queued
// (a request is only ever queued when it is created).
func EventFor(s Status) WebhookEvent {
	if s == StatusQueued {
		return EventCreated
	}
	return WebhookEvent("request." + string(s))
}

// Valid reports whether e is a known event type.
func (e WebhookEvent) Valid() bool {
	for _, x := range WebhookEvents {
		if x == e {
			return true
		}
	}
	return false
}

// Webhook is a registered endpoint. Secret is set only in the answer to the
// registration; SealedSecret is the encrypted form kept at rest and never
// leaves the service.
type Webhook struct {
	ID           string         `json:"id"`
	URL          string         `json:"url"`
	Events       []WebhookEvent `json:"events"`
	Description  string         `json:"description"`
	CreatedAt    Time           `json:"created_at"`
	Secret       string         `json:"secret,omitempty"`
	SealedSecret string         `json:"-"`
}

// WebhookInput is a validated registration body.
type WebhookInput struct {
	URL         string
	Events      []WebhookEvent // never empty: defaults applied
	Description string
}

// Limits of a registration.
const (
	WebhookURLMaxBytes         = 2048
	WebhookDescriptionMaxChars = 256
)

// WebhookDelivery is one delivery attempt as the deliveries listing shows it.
type WebhookDelivery struct {
	MessageID string       `json:"message_id"`
	EventType WebhookEvent `json:"event_type"`
	RequestID string       `json:"request_id"`
	// Attempt is 1 for the first try, 2 for the first retry, ...
	Attempt int `json:"attempt"`
	// State after this attempt: "delivered", "retrying" (NextAttemptAt says when)
	// or "failed" (the last step of the schedule failed: no more attempts).
	State string `json:"state"`
	// HTTPStatus is the receiver's status code; nil when no answer came (Error says why).
	HTTPStatus *int   `json:"http_status"`
	Error      string `json:"error,omitempty"`
	// At is when the attempt started; DurationMs how long it took.
	At            Time  `json:"at"`
	DurationMs    int64 `json:"duration_ms"`
	NextAttemptAt *Time `json:"next_attempt_at"`
}

// Delivery states.
const (
	DeliveryDelivered = "delivered"
	DeliveryRetrying  = "retrying"
	DeliveryFailed    = "failed"
)

// WebhookMessage is one outbox entry on its way to one endpoint: what the
// dispatcher sends and how it settles the attempt.
type WebhookMessage struct {
	Tenant string
	// Shard names the outbox of one of the tenant's shards (internal/store,
	// redis.tenant_shards) the message waits in: "" for the tenant's own. The
	// dispatcher counts its work per Queue.
	Shard      ShardName
	EndpointID string
	// ID is the webhook-id: the same for every endpoint and every retry.
	ID    string
	Event WebhookEvent
	// At is when the transition happened; Request is the representation then.
	At      time.Time
	Request *Request
	// Attempt is the number of this attempt (1 for the first).
	Attempt int
	// EntryID is the outbox stream entry; Retry and Lease name the retry
	// schedule entry this attempt was claimed from ("" and 0 for a first attempt).
	EntryID string
	Retry   string
	Lease   int64
}

// Queue is the name of the outbox m waits in: its Shard, or its Tenant.
func (m WebhookMessage) Queue() ShardName {
	if m.Shard != "" {
		return m.Shard
	}
	return ShardName(m.Tenant)
}

// WebhookSettlement is how one delivery attempt ended.
type WebhookSettlement struct {
	// Log is the attempt for the endpoint's delivery log; nil logs nothing (the
	// endpoint is gone).
	Log *WebhookDelivery
	// NextAttempt is when to try again; zero when the message is done.
	NextAttempt time.Time
	// Done: delivered, or the endpoint is gone. The message ends even if the
	// retry lease of the replica that settles it ran out meanwhile.
	Done bool
}

// WebhookTenant is a tenant in the registry the dispatchers walk.
type WebhookTenant struct {
	// Name is the queue's: the tenant's, or one of its shards' (WebhookMessage.Shard).
	Name ShardName
	// Tenant is the tenant it belongs to.
	Tenant string
	// Frozen tenants get no deliveries until they are unfrozen.
	Frozen bool
	// Endpoints is how many endpoints it has; 0 makes it a candidate for pruning.
	Endpoints int64
}
