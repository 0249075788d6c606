package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/defaults"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Options tunes a Store. Durations are applied at millisecond precision.
type Options struct {
	// Prefix starts every key. default: "as".
	Prefix string
	// OpTimeout bounds every Redis call. default: 1s.
	OpTimeout time.Duration
	// QueuedTimeout and ProcessingTimeout are the lifecycle timers, with per-type overrides.
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
	// PollRate, when set, makes the poll script count the read rate limits itself,
	// in the poll's own round trip, on the same counters as internal/ratelimit.
	PollRate *PollRate
	// Now is the clock; default time.Now. Tests and the embedded store inject theirs.
	Now func() time.Time
	// ScriptObserver, when set, is told the latency and error of every Lua script
	// call (metrics). default: nil, nothing is observed.
	ScriptObserver ScriptObserver
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
	// and in Redis (docs/performance.md, item 12). Each call is still one command
	// with its own reply, and the caller waits no longer than OpTimeout. serve
	// turns it on (redis.autopipeline) except on the embedded store, whose
	// in-memory pipes do not buffer: a deep pipeline would deadlock on them.
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
}

// ScriptObserver learns how each Lua script call went. name is the script's file
// name without ".lua" (create, transition, poll, delete, sweep, list, reapply);
// d includes the EVAL fallback when Redis had lost its script cache; err is the
// Redis error, nil when the script answered (whatever its outcome code). It must
// be safe for concurrent use and quick: it runs on every request's path.
type ScriptObserver interface {
	ObserveScript(name string, d time.Duration, err error)
}

// Store keeps requests in Redis.
type Store struct {
	rdb redis.UniversalClient
	// ap, when set, carries the script calls of run() (Options.AutoPipeline).
	ap   *redis.AutoPipeliner
	k    keys
	opts Options
	sc   scripts

	mu          sync.Mutex
	knownTenant map[string]bool     // tenants already added to the registry by this process
	seenTypes   map[string][]string // each tenant's request types as TenantSummary last saw them (console.go)
	slotKeys    map[int]string      // a key in each cluster slot Ready has asked about (ready.go)

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
	if o.WaitReplicas > 0 && o.WaitTimeout <= 0 {
		o.WaitTimeout = defaults.WaitTimeout
	}
	queued := make(map[string]time.Duration, len(o.QueuedTimeoutByType))
	for t, d := range o.QueuedTimeoutByType {
		if d > 0 { // an override of 0 means the default, as it always did
			queued[t] = d
		}
	}
	o.QueuedTimeoutByType = queued
	s := &Store{rdb: rdb, k: keys{prefix: o.Prefix}, opts: o, knownTenant: map[string]bool{},
		seenTypes: map[string][]string{}}
	millis := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	var err error
	if s.sc, err = loadScripts(luaConstants([]luaConst{
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
	})); err != nil {
		return nil, err
	}
	if c, ok := rdb.(autoPipeliner); ok && o.AutoPipeline {
		// The deferred face, because only its futures can be awaited under a
		// deadline (eval waits with WaitContext). The instance is cached on the
		// client and closed with it. No coalescing wait: a lone call flushes at
		// once, concurrent ones batch. Small batches (8), up to 8 in flight,
		// unordered: while Redis runs one batch the next ones are written and
		// answered, so this process and Redis work at the same time, where one
		// ordered stream of deep batches leaves them idle in turn
		// (docs/performance.md, item 12). No caller needs an order across calls:
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

func (s *Store) idemKey(tenant, op, id string, key domain.IdempotencyKey) string {
	h := sha256.Sum256([]byte(op + "\n" + id + "\n" + string(key)))
	return s.k.idempotency(tenant, hex.EncodeToString(h[:16]))
}

// fingerprint digests what a call asks for, to tell a replay from a reuse of the key.
func fingerprint(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Create registers a new request. replay is true when an Idempotency-Key made the
// request earlier; the answer is then that request as it is now.
func (s *Store) Create(ctx context.Context, p domain.CreateParams) (req *domain.Request, replay bool, err error) {
	in := p.Input
	fp := "" // only an Idempotency-Key needs the body's digest
	if p.IdemKey != "" {
		fp = fingerprint("create", in.Type, string(in.Context), strconv.Itoa(in.EstimatedDurationSeconds))
	}
	stale := ""
	for attempt := 0; attempt < 2; attempt++ {
		u, err := uuid.NewV7()
		if err != nil {
			return nil, false, fmt.Errorf("create request: new id: %w", err)
		}
		id := u.String()
		// created_at is the id's own timestamp, so that id order is creation order.
		created := uuidTime(u)
		keys := []string{s.k.record(p.Tenant, id), s.k.meta(p.Tenant), s.k.index(p.Tenant, domain.StatusQueued, in.Type),
			s.k.webhookFilter(p.Tenant), s.k.outbox(p.Tenant), s.k.audit(p.Tenant)}
		if p.IdemKey != "" {
			keys = append(keys, s.idemKey(p.Tenant, "create", "", p.IdemKey))
		}
		r, err := s.run(ctx, s.sc.create, keys, id, ms(created), newRecord(in.Type, p.CreatedBy, in.Context),
			fp, stale, in.Type, p.CreatedBy)
		if err != nil {
			return nil, false, backend("create request", err)
		}
		switch r.code {
		case codeOK:
			s.registerTenant(ctx, p.Tenant)
			s.outboxHook.written(p.Tenant)
			s.auditHook.written(p.Tenant)
			return &domain.Request{ID: id, Type: in.Type, Status: domain.StatusQueued, Context: in.Context,
				CreatedBy: p.CreatedBy, CreatedAt: domain.Time{Time: created}, UpdatedAt: domain.Time{Time: created}, Version: 1}, false, nil
		case codeReplay:
			pid := r.str
			res, err := s.read(ctx, domain.PollParams{Tenant: p.Tenant, ID: pid}, false)
			req := res.Request
			if domain.ErrorCode(err) == domain.NotFound {
				// The request the key made is gone (deleted or past retention): the key
				// may make a new one.
				stale = pid
				continue
			}
			return req, err == nil, err
		default:
			return nil, false, s.scriptError("create request", id, r.code, r.detail())
		}
	}
	return nil, false, backend("create request", errors.New("idempotency entry kept changing"))
}

// uuidTime is the millisecond timestamp of a UUIDv7.
func uuidTime(u uuid.UUID) time.Time {
	msec := int64(u[0])<<40 | int64(u[1])<<32 | int64(u[2])<<24 | int64(u[3])<<16 | int64(u[4])<<8 | int64(u[5])
	return time.UnixMilli(msec).UTC()
}

func (s *Store) registerTenant(ctx context.Context, tenant string) {
	s.mu.Lock()
	known := s.knownTenant[tenant]
	s.mu.Unlock()
	if known {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	// Best effort: the next create retries, and the sweeper also learns tenants from
	// API keys. The registry is a plain set outside every tenant's slot.
	if err := s.rdb.SAdd(ctx, s.k.tenants(), tenant).Err(); err == nil {
		s.mu.Lock()
		s.knownTenant[tenant] = true
		s.mu.Unlock()
	}
}

func unexpected(op string, r reply) error {
	return backend(op, fmt.Errorf("unexpected script outcome %d", r.code))
}

// PollRate is the read rate limit that the poll script counts: per credential and
// per tenant, fixed windows, with ulule/limiter's counter semantics (INCRBY, then
// PEXPIRE on the first hit), so that it shares its counters with the limiter.
type PollRate struct {
	CredentialLimit  int64
	CredentialWindow time.Duration
	TenantLimit      int64
	TenantWindow     time.Duration
}

// Poll reads a request for a caller and paces the caller (spec §5) in the same
// Redis round trip; with Options.PollRate it also counts the read rate limits
// there. The result's Rate is set whenever the call was counted, also on errors.
func (s *Store) Poll(ctx context.Context, p domain.PollParams) (domain.PollResult, error) {
	// a paced poll (a caller) never serves events: only unpaced reads parse them
	return s.read(ctx, p, p.Caller == domain.Unpaced)
}

// read runs poll.lua. Its reply is one string, the code digit then what
// parsePollReply reads: the retry_after or seconds left, the rate limit when one
// was counted, and for code 0 the record.
// withEvents asks for the record's events to be decoded too.
func (s *Store) read(ctx context.Context, p domain.PollParams, withEvents bool) (domain.PollResult, error) {
	var res domain.PollResult
	if !validID(p.ID) {
		return res, domain.ErrNotFound()
	}
	keys := []string{s.k.record(p.Tenant, p.ID), s.k.meta(p.Tenant), s.k.pacing(p.Tenant, p.ID)}
	args := []any{ms(s.now()), p.Caller}
	if r := s.opts.PollRate; r != nil && p.Credential != "" {
		keys = append(keys, s.k.rateCredential(p.Tenant, "read", p.Credential), s.k.rateTenant(p.Tenant))
		args = append(args, r.CredentialLimit, r.CredentialWindow.Milliseconds(), r.TenantLimit, r.TenantWindow.Milliseconds())
	}
	r, err := s.run(ctx, s.sc.poll, keys, args...)
	if err != nil {
		return res, backend("read request "+p.ID, err)
	}
	pr, ok := parsePollReply(r.str)
	if !ok {
		return res, unexpected("read request", r)
	}
	if pr.n == 4 {
		res.Rate = &domain.RateInfo{Allowed: r.code != codeRateLimited, Limit: pr.nums[1], Remaining: pr.nums[2], Reset: time.UnixMilli(pr.nums[3])}
	}
	switch r.code {
	case codeOK:
		if !pr.hasRec {
			return res, unexpected("read request", r)
		}
		res.RetryAfter = int(pr.nums[0])
		res.Request, err = decodeRecord(p.ID, pr.rec, withEvents)
		return res, err
	case codeRateLimited:
		return res, s.scriptError("read request", p.ID, r.code, []any{pr.nums[3]})
	}
	return res, s.scriptError("read request", p.ID, r.code, []any{pr.nums[0]})
}

// pollReply is poll.lua's answer after its code digit.
type pollReply struct {
	nums   [4]int64 // n, then rl_limit, rl_remaining, rl_reset_ms when counted
	n      int      // how many of nums were sent: 1, or 4 with a rate limit
	rec    string
	hasRec bool
}

// parsePollReply reads ",<n>[,<rl_limit>,<rl_remaining>,<rl_reset_ms>]", then
// optionally "|" and the record (poll.lua's header); ok is false for anything else.
func parsePollReply(str string) (pr pollReply, ok bool) {
	head, rec, hasRec := strings.Cut(str, "|")
	head, more := strings.CutPrefix(head, ",")
	for ; more && pr.n < len(pr.nums); pr.n++ {
		var f string
		f, head, more = strings.Cut(head, ",")
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return pollReply{}, false
		}
		pr.nums[pr.n] = v
	}
	if more || head != "" || (pr.n != 1 && pr.n != 4) {
		return pollReply{}, false
	}
	pr.rec, pr.hasRec = rec, hasRec
	return pr, true
}

// toInt64 reads a script's number, sent as an integer or as a string.
func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// validID reports whether id is a canonical lower-case UUID, as the service makes
// them; anything else cannot exist and never reaches Redis. It runs on every poll
// and transition, so it scans the bytes instead of parsing and re-printing.
func validID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// Events lists a request's status changes, oldest first.
func (s *Store) Events(ctx context.Context, tenant, id string) ([]domain.Event, error) {
	res, err := s.read(ctx, domain.PollParams{Tenant: tenant, ID: id}, true)
	if err != nil {
		return nil, err
	}
	return res.Request.Events, nil
}

// MarkProcessing moves a queued request to processing, or records a heartbeat and
// progress of a processing one.
func (s *Store) MarkProcessing(ctx context.Context, p domain.TransitionParams, in domain.ProgressInput) (*domain.Request, error) {
	return s.transition(ctx, p, "processing", domain.StatusProcessing, string(in.Progress), "", "")
}

// Complete marks a request succeeded with its result.
func (s *Store) Complete(ctx context.Context, p domain.TransitionParams, in domain.CompleteInput) (*domain.Request, error) {
	return s.transition(ctx, p, "complete", domain.StatusSucceeded, string(in.Result), in.ResultType, "")
}

// Fail marks a request failed.
func (s *Store) Fail(ctx context.Context, p domain.TransitionParams, in domain.FailInput) (*domain.Request, error) {
	return s.transition(ctx, p, "fail", domain.StatusFailed, string(in.Failure), "", "")
}

// Cancel marks a request cancelled.
func (s *Store) Cancel(ctx context.Context, p domain.TransitionParams, in domain.CancelInput) (*domain.Request, error) {
	payload := ""
	if in.Reason != "" {
		b, _ := json.Marshal(struct {
			Reason string `json:"reason"`
		}{in.Reason})
		payload = string(b)
	}
	return s.transition(ctx, p, "cancel", domain.StatusCancelled, payload, "", "")
}

// SystemActor is the "by" of transitions the service makes itself (timeouts).
const SystemActor = "system"

// ExpireQueued expires a request still queued past its queued timeout (counted
// from created_at, with the timeout configured now). done is false when there
// was nothing to do (it moved on, is not due, or is gone).
func (s *Store) ExpireQueued(ctx context.Context, tenant, id string) (done bool, err error) {
	done, _, err = s.expireQueued(ctx, tenant, id)
	return done, err
}

// expireQueued is ExpireQueued that also tells whether the request is gone.
func (s *Store) expireQueued(ctx context.Context, tenant, id string) (done, gone bool, err error) {
	return s.timeout(ctx, tenant, id, domain.StatusExpired, "q", domain.FailureJSON("REQUEST_EXPIRED", "the request stayed queued longer than its queued timeout"))
}

// TimeOutProcessing fails a processing request whose heartbeat stopped.
func (s *Store) TimeOutProcessing(ctx context.Context, tenant, id string) (done bool, err error) {
	done, _, err = s.timeout(ctx, tenant, id, domain.StatusFailed, "p", domain.FailureJSON("ERR_JOB_EXECUTION_TIMED_OUT", "no heartbeat within the processing timeout"))
	return done, err
}

// queuedTimeout is the queued timeout of requests of type typ.
func (s *Store) queuedTimeout(typ string) time.Duration {
	if d, ok := s.opts.QueuedTimeoutByType[typ]; ok { // New kept only overrides > 0
		return d
	}
	return s.opts.QueuedTimeout
}

func (s *Store) timeout(ctx context.Context, tenant, id string, to domain.Status, guard string, failure json.RawMessage) (done, gone bool, err error) {
	_, err = s.transition(ctx, domain.TransitionParams{Tenant: tenant, ID: id, By: SystemActor}, "timeout", to, string(failure), "", guard)
	switch {
	case err == nil:
		return true, false, nil
	case errors.Is(err, errNothingToDo):
		return false, false, nil
	case domain.ErrorCode(err) == domain.NotFound:
		return false, true, nil
	}
	return false, false, err
}

func (s *Store) transition(ctx context.Context, p domain.TransitionParams, op string, to domain.Status, payload, resultType, guard string) (*domain.Request, error) {
	if !validID(p.ID) {
		return nil, domain.ErrNotFound()
	}
	ca, _ := idMillis(p.ID)
	keys := []string{s.k.record(p.Tenant, p.ID), s.k.deadlines(p.Tenant), s.k.retentionBuckets(p.Tenant),
		s.k.pacing(p.Tenant, p.ID), s.k.meta(p.Tenant), s.k.webhookFilter(p.Tenant), s.k.outbox(p.Tenant), s.k.audit(p.Tenant),
		s.k.changes(p.Tenant, p.ID)}
	fp := ""
	if p.IdemKey != "" {
		keys = append(keys, s.idemKey(p.Tenant, op, p.ID, p.IdemKey))
		fp = fingerprint(op, payload, resultType)
	}
	r, err := s.run(ctx, s.sc.transition, keys, statusCode[to], ms(s.now()), p.By, payload, resultType, guard,
		fp, p.ID, ca, s.k.retentionBucketPrefix(p.Tenant), s.k.indexPrefix(p.Tenant))
	if err != nil {
		return nil, backend(op+" request "+p.ID, err)
	}
	if r.code == codeOK {
		s.outboxHook.written(p.Tenant)
		s.auditHook.written(p.Tenant)
	}
	if r.code == codeOK || r.code == codeReplay {
		return decodeRecord(p.ID, r.str, false)
	}
	return nil, s.scriptError(op+" request", p.ID, r.code, r.detail())
}

// Delete removes a request and everything that belongs to it; its audit
// entry names no actor (by ""). Callers that know who asked use DeleteBy.
func (s *Store) Delete(ctx context.Context, tenant, id string) error {
	return s.DeleteBy(ctx, tenant, id, "")
}

// DeleteBy removes a request and everything that belongs to it; by (a key id)
// is who asked, for the audit entry.
func (s *Store) DeleteBy(ctx context.Context, tenant, id, by string) error {
	if !validID(id) {
		return domain.ErrNotFound()
	}
	keys := []string{s.k.record(tenant, id), s.k.deadlines(tenant), s.k.pacing(tenant, id), s.k.audit(tenant), s.k.meta(tenant), s.k.changes(tenant, id)}
	r, err := s.run(ctx, s.sc.remove, keys, id, ms(s.now()), s.k.indexPrefix(tenant), by)
	if err != nil {
		return backend("delete request "+id, err)
	}
	if r.code == codeOK {
		s.auditHook.written(tenant)
		return nil
	}
	return s.scriptError("delete request", id, r.code, r.rest)
}

// SetFrozen freezes or unfreezes a tenant (spec §2).
func (s *Store) SetFrozen(ctx context.Context, tenant string, frozen bool) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	var err error
	if frozen {
		err = s.rdb.HSet(ctx, s.k.meta(tenant), "fz", "1").Err()
	} else {
		err = s.rdb.HDel(ctx, s.k.meta(tenant), "fz").Err()
	}
	if err != nil {
		return backend("freeze tenant "+tenant, err)
	}
	return nil
}

// Frozen reports whether a tenant is frozen.
func (s *Store) Frozen(ctx context.Context, tenant string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	v, err := s.rdb.HGet(ctx, s.k.meta(tenant), "fz").Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, backend("read tenant "+tenant, err)
	}
	return v == "1", nil
}

// ServerConfig reads Redis configuration parameters (CONFIG GET), for the
// start-up checks of the settings docs/operations.md requires. The embedded
// store has no CONFIG: it answers an error.
func (s *Store) ServerConfig(ctx context.Context, params ...string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	args := []any{"config", "get"}
	for _, p := range params {
		args = append(args, p)
	}
	cmd := redis.NewMapStringStringCmd(ctx, args...)
	_ = s.rdb.Process(ctx, cmd)
	v, err := cmd.Result()
	if err != nil {
		return nil, fmt.Errorf("config get %s: %w", strings.Join(params, " "), err)
	}
	return v, nil
}
