// Package defaults holds the default of every setting that more than one
// package falls back to: config.Defaults() offers them to an operator, and the
// store and the HTTP server apply them to an option left zero (tests, tools and
// the embedded store build those without a configuration). Written here once,
// the three cannot drift apart. It imports nothing, so every package may
// import it; a default that only one package uses stays with that package.
package defaults

import "time"

// Redis (config redis.*; store.Options).
const (
	KeyPrefix   = "as"
	OpTimeout   = time.Second
	WaitTimeout = 500 * time.Millisecond
)

// Lifecycle and idempotency (config lifecycle.*, idempotency.ttl; store.Options).
const (
	QueuedTimeout     = 24 * time.Hour
	ProcessingTimeout = 15 * time.Minute
	// SweepInterval is also the width of the retention buckets, so that a
	// terminal record's index entry goes within two sweep intervals.
	SweepInterval  = 10 * time.Second
	IdempotencyTTL = 24 * time.Hour
	// SweepBatch bounds the records one sweeper tick handles per tenant.
	SweepBatch = 500
)

// Bodies and stored payloads (config http.body_limit_bytes, limits.*;
// httpapi.Options).
const (
	BodyLimitBytes = 1 << 20
	ContextBytes   = 4096
	ResultBytes    = 16384
)

// Waiting (config wait.*; httpapi.WaitOptions).
const (
	WaitMax       = 25 * time.Second
	WaitHeartbeat = 15 * time.Second
	StreamMax     = 10 * time.Minute
	// ReplayWindow is how long a watch of many requests may resume
	// (wait.replay_window, docs/reference.md §16), and ReplayEntries the most
	// changes each tenant shard's change log keeps (wait.replay_entries).
	ReplayWindow  = 10 * time.Minute
	ReplayEntries = 20000
)

// Webhooks (config webhooks.*; webhook.DispatcherOptions).
const WebhookTimeout = 5 * time.Second

// WebhookRetrySchedule is webhooks.retry_schedule (docs/reference.md §10): the waits before
// each retry; a fresh slice on every call.
func WebhookRetrySchedule() []time.Duration {
	return []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute,
		30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour}
}

// Audit (config audit.claim_after; audit.DrainerOptions).
const AuditClaimAfter = 30 * time.Second

// Console (config console.session_ttl; console.Options).
const ConsoleSessionTTL = 8 * time.Hour

// PollScheduleSeconds is the default polling.schedule in whole seconds, as the
// store and the HTTP server take it; a fresh slice on every call.
func PollScheduleSeconds() []int { return []int{1, 2, 5, 10, 30} }

// PollSchedule is PollScheduleSeconds as durations, as the configuration
// holds it; a fresh slice on every call.
func PollSchedule() []time.Duration {
	secs := PollScheduleSeconds()
	out := make([]time.Duration, len(secs))
	for i, s := range secs {
		out[i] = time.Duration(s) * time.Second
	}
	return out
}
