package domain

import (
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// WebhookEvent is the type of a webhook message (spec §10).
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

// DecodeWebhook validates a registration body {"url", "events", "description"}.
// The URL must be absolute http or https with a host and no credentials or
// fragment; whether http and the address it names are allowed is the webhook
// package's guard's decision. Events are deduplicated and kept in lifecycle order.
func DecodeWebhook(body []byte) (WebhookInput, error) {
	var raw struct {
		URL         *string   `json:"url"`
		Events      *[]string `json:"events"`
		Description *string   `json:"description"`
	}
	if err := decodeObject(body, &raw, false); err != nil {
		return WebhookInput{}, err
	}
	var v validator
	var in WebhookInput
	switch {
	case raw.URL == nil:
		v.add("url", "is required")
	default:
		in.URL = *raw.URL
		if msg := checkWebhookURL(in.URL); msg != "" {
			v.add("url", "%s", msg)
		}
	}
	if raw.Events == nil {
		in.Events = append([]WebhookEvent(nil), DefaultWebhookEvents...)
	} else if len(*raw.Events) == 0 {
		v.add("events", "must list at least one event type (omit it for the four terminal ones)")
	} else {
		seen := map[WebhookEvent]bool{}
		for _, e := range *raw.Events {
			ev := WebhookEvent(e)
			if !ev.Valid() {
				v.add("events", "unknown event type %q (want one of request.created, request.processing, request.succeeded, request.failed, request.cancelled, request.expired)", truncate(e, 64))
				continue
			}
			seen[ev] = true
		}
		for _, ev := range WebhookEvents {
			if seen[ev] {
				in.Events = append(in.Events, ev)
			}
		}
	}
	if raw.Description != nil {
		in.Description = *raw.Description
		if !utf8.ValidString(in.Description) || utf8.RuneCountInString(in.Description) > WebhookDescriptionMaxChars {
			v.add("description", "must be at most %d characters", WebhookDescriptionMaxChars)
		}
	}
	if err := v.err(); err != nil {
		return WebhookInput{}, err
	}
	return in, nil
}

func checkWebhookURL(s string) string {
	if s == "" {
		return "is required"
	}
	if len(s) > WebhookURLMaxBytes {
		return "must be at most 2048 bytes"
	}
	u, err := url.Parse(s)
	if err != nil {
		return "is not a valid URL"
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		// Whether http is allowed too is webhooks.allow_http's, checked by
		// the webhook guard, which says "must use https" when it is not.
		return "must be an absolute http or https URL"
	case u.Host == "" || u.Hostname() == "":
		return "must name a host"
	case strings.HasSuffix(u.Host, ":") || u.Port() != "" && !validPort(u.Port()):
		return "must name a port from 1 to 65535, or none"
	case u.User != nil:
		return "must not carry credentials"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "must not carry a fragment"
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return "must be ASCII without spaces (percent-encode the rest)"
		}
	}
	return ""
}

// validPort reports whether p (digits, as url.Parse leaves a port) is 1..65535
// written without leading zeros.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && p[0] != '0'
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

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
	Shard      string
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
func (m WebhookMessage) Queue() string {
	if m.Shard != "" {
		return m.Shard
	}
	return m.Tenant
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
	Name string
	// Tenant is the tenant it belongs to.
	Tenant string
	// Frozen tenants get no deliveries until they are unfrozen.
	Frozen bool
	// Endpoints is how many endpoints it has; 0 makes it a candidate for pruning.
	Endpoints int64
}
