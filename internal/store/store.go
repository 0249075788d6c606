package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/defaults"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
)

// Options tunes a Store. Durations are applied at millisecond precision.
type Options struct {
	// Prefix starts every key. default: "as".
	Prefix string
	// OpTimeout bounds every Redis call. default: 1s.
	OpTimeout time.Duration
	// QueuedTimeout and ProcessingTimeout are the lifecycle timers, with per-type
	// overrides, each resolved (> 0: config's TimeoutsFor says what an override
	// inherits).
	QueuedTimeout, ProcessingTimeout             time.Duration
	QueuedTimeoutByType, ProcessingTimeoutByType map[string]time.Duration
	// Retention of terminal records (0 = forever), with per-type overrides.
	Retention       time.Duration
	RetentionByType map[string]time.Duration
	// IdempotencyTTL: how long an Idempotency-Key is remembered. default: 24h.
	IdempotencyTTL time.Duration
	// Schedule is the poll pacing schedule in whole seconds, with per-type overrides.
	Schedule       []int
	ScheduleByType map[string][]int
	// EarlyTolerance: polls sooner than (1 - tolerance) x Retry-After are early.
	EarlyTolerance float64
	// RateLimits, when set, makes the scripts count the rate limits of the calls
	// they serve, in the call's own round trip, on the same counters as
	// internal/ratelimit: polls and event reads against Read, creates and
	// transitions against Write, deletes against Admin, each also against
	// Tenant. A scope whose rate is zero is not counted here (CountsRateLimits):
	// the HTTP layer then counts it itself. Calls without a Credential are not
	// counted. default: nil, nothing is counted.
	RateLimits *ratelimit.Rates
	// Now is the clock; default time.Now. Tests and the embedded store inject theirs.
	Now func() time.Time
	// ScriptObserver, when set, is told the latency and error of every Lua script
	// call (metrics). default: nil, nothing is observed.
	ScriptObserver ScriptObserver
	// Tracer, when set, makes the spans of script calls and timeouts, keeps a
	// create's trace context in its record and links later transitions to it
	// (docs/reference.md §17). default: nil, no tracing work at all.
	Tracer Tracer
	// WaitReplicas > 0 acknowledges a create, transition or delete only after
	// `WAIT WaitReplicas WaitTimeout` confirms that many replicas have it; otherwise
	// the call fails with BACKEND_UNAVAILABLE saying the outcome is unknown
	// (durability.go). Such writes may take OpTimeout + WaitTimeout. default: 0,
	// no waiting.
	WaitReplicas int
	// WaitTimeout bounds that WAIT. default: 500ms.
	WaitTimeout time.Duration
	// AutoPipeline sends script calls through go-redis's autopipeliner
	// (AsyncAutoPipeline): calls made at the same time by concurrent requests
	// share one write and one read on one connection, which saves syscalls here
	// and in Redis (docs/performance-log.md, item 12). Each call is still one command
	// with its own reply, and the caller waits no longer than OpTimeout. serve
	// turns it on (redis.autopipeline) on every backend, the embedded one too,
	// but a Cluster ignores it (New says why).
	// Writes that wait for replicas (WaitReplicas > 0) keep their own pipeline
	// with WAIT on one connection (durability.go) and do not use it.
	// default: false, one round trip per call on a pooled connection.
	AutoPipeline bool
	// RetentionBucket is the width of the retention buckets (keys.go): the sweeper
	// cleans a terminal record's index entry within RetentionBucket plus one sweep
	// interval after its expires_at, so serve sets it to lifecycle.sweep_interval.
	// default: 10s.
	RetentionBucket time.Duration
	// AuditBacklog > 0 makes every create, transition, heartbeat and delete
	// record an audit entry in the same script (audit.go), and is how many
	// entries a tenant's audit stream may hold while the sink does not take
	// them; past it, entries are counted as dropped instead. default: 0, no
	// audit entries (audit.sink none).
	AuditBacklog int
	// TenantShards is S, how many hash tags (shards) each tenant's request keys
	// are spread over (redis.tenant_shards, shard.go), 1..MaxTenantShards. It may
	// be raised later (older requests stay where they are, and are found), never
	// lowered: listings and the sweeper cover shards 0..S-1 only. default: 1.
	TenantShards int
	// ReplayWindow is how long a watch's position may be resumed
	// (wait.replay_window, docs/reference.md §16): the change logs keep that
	// long (watch.go), trimmed by the sweeper. default: 10m.
	ReplayWindow time.Duration
	// ChangeLogEntries bounds each tenant shard's change log too
	// (wait.replay_entries); the sweeper trims it to that length. default: 20000.
	ChangeLogEntries int
}

// ScriptObserver learns how each Lua script call went. name is the script's file
// name without ".lua" (create, transition, poll, delete, sweep, list, reapply);
// d includes the EVAL fallback when Redis had lost its script cache; err is the
// Redis error, nil when the script answered (whatever its outcome code). It must
// be safe for concurrent use and quick: it runs on every request's path.
type ScriptObserver interface {
	ObserveScript(name string, d time.Duration, err error)
}

// Tracer is what the store asks of tracing (internal/tracing implements it;
// the store knows no OpenTelemetry). Every method must be safe for concurrent
// use and cheap when ctx's call is not sampled.
type Tracer interface {
	// StartScript starts the span of one script call, child of ctx's span;
	// end is given the Redis error (nil when the script answered).
	StartScript(ctx context.Context, name string) (context.Context, func(err error))
	// KeepContext is ctx's trace context as a new record keeps it, "" for
	// none; longer than MaxTraceBytes, it is not kept.
	KeepContext(ctx context.Context) string
	// LinkKept links ctx's span to a create's kept trace context.
	LinkKept(ctx context.Context, kept string)
	// StartTimeout starts the span of one of the sweeper's timeouts of
	// request id, moving it to status to.
	StartTimeout(ctx context.Context, id, to string) (context.Context, func(err error))
}

// noEnd ends no span.
func noEnd(error) {}

// traceScript starts the span of a call of sc when the store traces.
func (s *Store) traceScript(ctx context.Context, sc *script) (context.Context, func(error)) {
	if s.opts.Tracer == nil {
		return ctx, noEnd
	}
	return s.opts.Tracer.StartScript(ctx, sc.name)
}

// Store keeps requests in Redis.
type Store struct {
	rdb redis.UniversalClient
	// ap, when set, carries the script calls of run() (Options.AutoPipeline).
	ap   *redis.AutoPipeliner
	k    keys
	tags *shardTags
	// spread is newShard's memory of which master holds which shard (shard.go).
	spread *shardSpread
	opts   Options
	sc     scripts

	mu          sync.Mutex
	knownTenant map[string]bool     // tenants already added to the registry by this process
	seenTypes   map[string][]string // each tenant's request types as TenantSummary last saw them (console.go)
	slotKeys    map[int]string      // a key in each cluster slot Ready has asked about (ready.go)

	// staleGroups, set by tests only, replaces shardGroups' answer: a slot
	// map that no longer matches the cluster (list.go).
	staleGroups func(shards int) [][]int

	outboxHook outboxHook // tells an in-process webhook dispatcher about writes (webhooks.go)
	auditHook  outboxHook // tells an in-process audit drainer about writes (audit.go)
}

// New returns a Store over rdb. It does not talk to Redis: a Redis that is down at
// start is the same as one that goes down later.
func New(rdb redis.UniversalClient, o Options) (*Store, error) {
	if o.Prefix == "" {
		o.Prefix = defaults.KeyPrefix
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = defaults.OpTimeout
	}
	if o.QueuedTimeout <= 0 {
		o.QueuedTimeout = defaults.QueuedTimeout
	}
	if o.ProcessingTimeout <= 0 {
		o.ProcessingTimeout = defaults.ProcessingTimeout
	}
	if o.IdempotencyTTL <= 0 {
		o.IdempotencyTTL = defaults.IdempotencyTTL
	}
	if len(o.Schedule) == 0 {
		o.Schedule = defaults.PollScheduleSeconds()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RetentionBucket < time.Millisecond {
		o.RetentionBucket = defaults.SweepInterval
	}
	if o.TenantShards <= 0 {
		o.TenantShards = 1
	}
	if o.ReplayWindow < time.Millisecond {
		o.ReplayWindow = defaults.ReplayWindow
	}
	if o.ChangeLogEntries <= 0 {
		o.ChangeLogEntries = defaults.ReplayEntries
	}
	if o.TenantShards > MaxTenantShards {
		return nil, fmt.Errorf("store: %d tenant shards, at most %d", o.TenantShards, MaxTenantShards)
	}
	if o.WaitReplicas > 0 && o.WaitTimeout <= 0 {
		o.WaitTimeout = defaults.WaitTimeout
	}
	if o.RateLimits != nil { // the scripts' constants are made of them now: keep them
		r := *o.RateLimits
		o.RateLimits = &r
	}
	s := &Store{rdb: rdb, k: keys{prefix: o.Prefix}, tags: &shardTags{}, spread: &shardSpread{}, opts: o, knownTenant: map[string]bool{},
		seenTypes: map[string][]string{}}
	millis := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	var err error
	if s.sc, err = loadScripts(append([]luaConst{
		{"EARLY_TOLERANCE", o.EarlyTolerance},
		{"SCHEDULE", joinInts(o.Schedule)},
		{"SCHEDULE_BY_TYPE", encodeByType(o.ScheduleByType, joinInts)},
		{"QUEUED_TIMEOUT", o.QueuedTimeout.Milliseconds()},
		{"QUEUED_TIMEOUT_BY_TYPE", encodeByType(o.QueuedTimeoutByType, millis)},
		{"PROCESSING_TIMEOUT", o.ProcessingTimeout.Milliseconds()},
		{"PROCESSING_TIMEOUT_BY_TYPE", encodeByType(o.ProcessingTimeoutByType, millis)},
		{"RETENTION", o.Retention.Milliseconds()},
		{"RETENTION_BY_TYPE", encodeByType(o.RetentionByType, millis)},
		{"BUCKET_WIDTH", o.RetentionBucket.Milliseconds()},
		{"IDEMPOTENCY_TTL", millis(o.IdempotencyTTL)},
		{"OUTBOX_BOUND", strconv.Itoa(outboxCap)},
		{"AUDIT_BOUND", int64(max(o.AuditBacklog, 0))},
		{"PUBLISH", publishCommand(rdb)},
	}, rateConstants(o.RateLimits, o.TenantShards)...)); err != nil {
		return nil, err
	}
	// Not on a Cluster: the autopipeliner queues by slot range, and a range
	// spans masters, so while one master is dead (until its replica is
	// promoted) the batches that hold a call for it held calls for healthy
	// masters past their deadline too: TestClusterFailover saw 1 to 6 503s
	// per failover on masters that never failed with it, none without it.
	_, cluster := rdb.(*redis.ClusterClient)
	if c, ok := rdb.(autoPipeliner); ok && o.AutoPipeline && !cluster {
		// The deferred face, because only its futures can be awaited under a
		// deadline (eval waits with WaitContext). The instance is cached on the
		// client and closed with it. No coalescing wait: a lone call flushes at
		// once, concurrent ones batch. Small batches (8), up to 8 in flight,
		// unordered: while Redis runs one batch the next ones are written and
		// answered, so this process and Redis work at the same time, where one
		// ordered stream of deep batches leaves them idle in turn
		// (docs/performance-log.md, item 12). No caller needs an order across calls:
		// each waits for its own reply before its next call.
		apo := redis.DefaultAutoPipelineOptions()
		apo.Unordered, apo.MaxConcurrentBatches, apo.MaxBatchSize = true, 8, 8
		ap, err := c.AsyncAutoPipelineWithOptions(apo)
		if err != nil {
			return nil, fmt.Errorf("store: autopipeline: %w", err)
		}
		s.ap = ap
	}
	return s, nil
}

// rateConstants hands the scripts the rates they count (rate_count in lib.lua):
// RL_<SCOPE>_LIMIT, a number, and RL_<SCOPE>_WINDOW, milliseconds as a string
// (PEXPIRE's argument); zeros for rates not counted, whose counters Go never
// names.
//
// With S tenant shards every shard has its own counters, each enforcing
// ceil(limit / S) of every limit (docs/pacing.md, Rate limits across tenant
// shards): S = 1 counts the limits as configured.
func rateConstants(r *ratelimit.Rates, shards int) []luaConst {
	var rates ratelimit.Rates
	if r != nil {
		rates = *r
	}
	if shards > 1 {
		for _, x := range []*ratelimit.Rate{&rates.Read, &rates.Write, &rates.Admin, &rates.Tenant} {
			if x.Limit > 0 {
				x.Limit = (x.Limit + int64(shards) - 1) / int64(shards)
			}
		}
	}
	var out []luaConst
	for _, x := range []struct {
		name string
		rate ratelimit.Rate
	}{{"READ", rates.Read}, {"WRITE", rates.Write}, {"ADMIN", rates.Admin}, {"TENANT", rates.Tenant}} {
		out = append(out, luaConst{"RL_" + x.name + "_LIMIT", x.rate.Limit},
			luaConst{"RL_" + x.name + "_WINDOW", strconv.FormatInt(x.rate.Period.Milliseconds(), 10)})
	}
	return out
}

// CountsRateLimits reports whether the scripts count the calls that need scope
// ("read", "write", "admin") against the rate limits (Options.RateLimits): the
// HTTP layer asks, so that a call is counted once, here or there.
func (s *Store) CountsRateLimits(scope string) bool { return s.opts.RateLimits.Counts(scope) }

// counters are the rate-limit counters, under hash tag tag, of a call of
// credential for scope: none when the scripts do not count that scope or no
// credential is given.
func (s *Store) counters(tag, scope, credential string) counters {
	if credential == "" || !s.opts.RateLimits.Counts(scope) {
		return counters{}
	}
	c, t := s.k.rateCounters(tag, scope, credential)
	return counters{c, t}
}

// setRate hands a counted rate limit to the caller's out parameter.
func setRate(out *domain.RateInfo, r reply) {
	if out != nil && r.counted {
		*out = r.rate
	}
}

// publishCommand is how the scripts announce changes (keys.changes): sharded
// pub/sub on a Cluster, where a plain PUBLISH would be broadcast to every node
// of the bus, and where the hub subscribes on the shard that owns the channel's
// slot; plain pub/sub elsewhere (miniredis has no SPUBLISH).
func publishCommand(rdb redis.UniversalClient) string {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// autoPipeliner is what *redis.Client, *redis.ClusterClient and *redis.Ring offer.
type autoPipeliner interface {
	AsyncAutoPipelineWithOptions(*redis.AutoPipelineOptions) (*redis.AutoPipeliner, error)
}

// encodeByType writes a per-type map as ";type=value;type2=value;" for per_type() in lib.lua.
func encodeByType[V any](m map[string]V, enc func(V) string) string {
	if len(m) == 0 {
		return ""
	}
	names := make([]string, 0, len(m))
	for t := range m {
		names = append(names, t)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteByte(';')
	for _, t := range names {
		b.WriteString(t + "=" + enc(m[t]) + ";")
	}
	return b.String()
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func (s *Store) now() time.Time { return s.opts.Now() }

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// backend wraps a Redis failure as BACKEND_UNAVAILABLE: callers see a 503 with
// Retry-After, never the Redis message.
func backend(op string, err error) error {
	msg := "The status store is unavailable; retry later."
	var de *domain.Error
	if errors.As(err, &de) && de.Code == domain.BackendUnavailable && de.Err != nil {
		msg, err = de.Message, de.Err // e.g. a write whose outcome is unknown (durability.go)
	}
	return &domain.Error{Code: domain.BackendUnavailable, Message: msg,
		RetryAfterSeconds: 1, Err: fmt.Errorf("%s: %w", op, err)}
}
