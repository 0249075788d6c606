package config

import (
	"time"

	"github.com/asyncstatus/asyncstatus/internal/defaults"
)

// Defaults returns the configuration used when neither the file nor the
// environment says otherwise. Every call returns fresh slices, so a caller may
// modify its copy freely. Values that the store or the HTTP server also fall
// back to come from internal/defaults, the one place they are written.
func Defaults() Config {
	return Config{
		Redis: Redis{
			KeyPrefix:    defaults.KeyPrefix,
			OpTimeout:    defaults.OpTimeout,
			AutoPipeline: true,
			WaitTimeout:  defaults.WaitTimeout,
		},
		HTTP: HTTP{
			Addr:            ":8080",
			BodyLimitBytes:  defaults.BodyLimitBytes,
			ReadTimeout:     10 * time.Second,
			WriteTimeout:    10 * time.Second,
			IdleTimeout:     60 * time.Second,
			ShutdownTimeout: 10 * time.Second,
		},
		Auth: Auth{
			KeyCacheTTL:      10 * time.Second,
			AcceptLegacyKeys: true,
		},
		Polling: Polling{
			Schedule:       defaults.PollSchedule(),
			EarlyTolerance: 0.2,
		},
		RateLimit: RateLimit{
			Enabled: true,
			Read:    "50-S",
			Write:   "10000-S",
			Admin:   "5-S",
			Tenant:  "20000-S",
			Timeout: 200 * time.Millisecond,
		},
		Lifecycle: Lifecycle{
			QueuedTimeout:     defaults.QueuedTimeout,
			ProcessingTimeout: defaults.ProcessingTimeout,
			SweepInterval:     defaults.SweepInterval,
			SweepBatch:        defaults.SweepBatch,
		},
		Retention: Retention{
			Terminal: 720 * time.Hour,
		},
		Idempotency: Idempotency{
			TTL: defaults.IdempotencyTTL,
		},
		Limits: Limits{
			ContextBytes: defaults.ContextBytes,
			ResultBytes:  defaults.ResultBytes,
		},
		Webhooks: Webhooks{
			// Webhooks are part of the v1 contract (docs/reference.md §10), so they work out of
			// the box; the switch exists for operators who want to turn them off.
			Enabled:       true,
			Timeout:       defaults.WebhookTimeout,
			RetrySchedule: defaults.WebhookRetrySchedule(),
		},
		Audit: Audit{
			// log: nothing is lost unless an operator turns it off.
			Sink:         "log",
			FileMaxBytes: 100 << 20,
			FileKeep:     10,
			MaxBacklog:   100000,
			ClaimAfter:   defaults.AuditClaimAfter,
		},
		Log: Log{
			Format: "json",
			Level:  "info",
		},
		Runtime: Runtime{GCPercent: 400},
		Console: Console{
			Addr:       "127.0.0.1:8081",
			SessionTTL: defaults.ConsoleSessionTTL,
		},
		Wait: Wait{
			Max:                     defaults.WaitMax,
			MaxWaiters:              10000,
			MaxWaitersPerTenant:     1000,
			MaxWaitersPerCredential: 100,
			Heartbeat:               defaults.WaitHeartbeat,
			StreamMax:               defaults.StreamMax,
			ReplayWindow:            defaults.ReplayWindow,
			ReplayEntries:           defaults.ReplayEntries,
		},
		Tracing: Tracing{
			SampleRatio: 1.0,
			ServiceName: "asyncstatus",
		},
	}
}

// ScheduleFor returns the polling schedule of request type typ: its by_type
// override if it has one, else the global schedule. The slice is shared with
// p; callers must not modify it.
func (p Polling) ScheduleFor(typ string) []time.Duration {
	if s, ok := p.ByType[typ]; ok && len(s) > 0 {
		return s
	}
	return p.Schedule
}

// For returns how long a terminal record of request type typ is kept; 0 means
// forever. An explicit by_type entry wins even when it is 0, so one type can be
// kept forever while the others expire.
func (r Retention) For(typ string) time.Duration {
	if d, ok := r.ByType[typ]; ok {
		return d
	}
	return r.Terminal
}

// TimeoutsFor returns the queued and processing timeouts of request type typ.
// A by_type override replaces only the timers it sets (zero means "use the
// default"), so an override may change one timer and inherit the other.
func (l Lifecycle) TimeoutsFor(typ string) (queued, processing time.Duration) {
	queued, processing = l.QueuedTimeout, l.ProcessingTimeout
	if o, ok := l.ByType[typ]; ok {
		if o.QueuedTimeout > 0 {
			queued = o.QueuedTimeout
		}
		if o.ProcessingTimeout > 0 {
			processing = o.ProcessingTimeout
		}
	}
	return queued, processing
}
