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
	// Now is the clock; default time.Now. Tests and the embedded store inject theirs.
	Now func() time.Time
}

// Store keeps requests in Redis.
type Store struct {
	rdb  redis.UniversalClient
	k    keys
	opts Options
	sc   scripts

	// ARGV forms of the per-type settings, encoded once.
	processingByType, retentionByType, scheduleDefault, scheduleByType, tolerance string

	mu          sync.Mutex
	knownTenant map[string]bool // tenants already added to the registry by this process
}

// New returns a Store over rdb. It does not talk to Redis: a Redis that is down at
// start is the same as one that goes down later.
func New(rdb redis.UniversalClient, o Options) (*Store, error) {
	if o.Prefix == "" {
		o.Prefix = "as"
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = time.Second
	}
	if o.QueuedTimeout <= 0 {
		o.QueuedTimeout = 24 * time.Hour
	}
	if o.ProcessingTimeout <= 0 {
		o.ProcessingTimeout = 15 * time.Minute
	}
	if o.IdempotencyTTL <= 0 {
		o.IdempotencyTTL = 24 * time.Hour
	}
	if len(o.Schedule) == 0 {
		o.Schedule = []int{1, 2, 5, 10, 30}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	sc, err := loadScripts()
	if err != nil {
		return nil, err
	}
	s := &Store{rdb: rdb, k: keys{prefix: o.Prefix}, opts: o, sc: sc, knownTenant: map[string]bool{}}
	s.processingByType = encodeByType(o.ProcessingTimeoutByType, func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) })
	s.retentionByType = encodeByType(o.RetentionByType, func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) })
	s.scheduleDefault = joinInts(o.Schedule)
	s.scheduleByType = encodeByType(o.ScheduleByType, joinInts)
	s.tolerance = strconv.FormatFloat(o.EarlyTolerance, 'f', -1, 64)
	return s, nil
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

// Client is the underlying Redis client (for the rate limiter and health checks).
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Prefix is the key prefix.
func (s *Store) Prefix() string { return s.k.prefix }

func (s *Store) now() time.Time { return s.opts.Now() }

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// backend wraps a Redis failure as BACKEND_UNAVAILABLE: callers see a 503 with
// Retry-After, never the Redis message.
func backend(op string, err error) error {
	return &domain.Error{Code: domain.BackendUnavailable, Message: "The status store is unavailable; retry later.",
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
	fp := fingerprint("create", in.Type, string(in.Context), strconv.Itoa(in.EstimatedDurationSeconds))
	stale := ""
	for attempt := 0; attempt < 2; attempt++ {
		u, err := uuid.NewV7()
		if err != nil {
			return nil, false, fmt.Errorf("create request: new id: %w", err)
		}
		id := u.String()
		// created_at is the id's own timestamp, so that id order is creation order.
		created := uuidTime(u)
		keys := []string{s.k.record(p.Tenant, id), s.k.meta(p.Tenant), s.k.statusSet(p.Tenant, domain.StatusQueued),
			s.k.typeSet(p.Tenant, in.Type), s.k.deadlines(p.Tenant)}
		if p.IdemKey != "" {
			keys = append(keys, s.idemKey(p.Tenant, "create", "", p.IdemKey))
		}
		qt := s.opts.QueuedTimeout
		if d, ok := s.opts.QueuedTimeoutByType[in.Type]; ok && d > 0 {
			qt = d
		}
		r, err := s.run(ctx, s.sc.create, keys, id, ms(created), in.Type, string(in.Context), p.CreatedBy,
			ms(created.Add(qt)), fp, s.opts.IdempotencyTTL.Milliseconds(), stale)
		if err != nil {
			return nil, false, backend("create request", err)
		}
		switch r.code {
		case codeOK:
			s.registerTenant(ctx, p.Tenant)
			return &domain.Request{ID: id, Type: in.Type, Status: domain.StatusQueued, Context: in.Context,
				CreatedBy: p.CreatedBy, CreatedAt: domain.Time{Time: created}, UpdatedAt: domain.Time{Time: created}, Version: 1}, false, nil
		case codeFrozen:
			return nil, false, errFrozen()
		case codeIdemReused:
			return nil, false, errIdemReused()
		case codeReplay:
			pid, _ := r.rest[0].(string)
			req, _, err := s.read(ctx, p.Tenant, pid, "")
			if domain.ErrorCode(err) == domain.NotFound {
				// The request the key made is gone (deleted or past retention): the key
				// may make a new one.
				stale = pid
				continue
			}
			return req, err == nil, err
		default:
			return nil, false, unexpected("create request", r)
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

func errFrozen() error {
	return domain.Errorf(domain.TenantFrozen, "The tenant is frozen by an operator; reads and creates are refused.")
}

func errIdemReused() error {
	return domain.Errorf(domain.IdempotencyKeyReused, "This Idempotency-Key was already used with a different request body.")
}

func unexpected(op string, r reply) error {
	return backend(op, fmt.Errorf("unexpected script outcome %d", r.code))
}

// Poll reads a request for a caller and paces the caller (spec §5) in the same
// Redis round trip. retryAfter is 0 for terminal requests.
func (s *Store) Poll(ctx context.Context, tenant, id, caller string) (req *domain.Request, retryAfter int, err error) {
	return s.read(ctx, tenant, id, caller)
}

func (s *Store) read(ctx context.Context, tenant, id, caller string) (*domain.Request, int, error) {
	if !validID(id) {
		return nil, 0, domain.ErrNotFound()
	}
	r, err := s.run(ctx, s.sc.poll, []string{s.k.record(tenant, id), s.k.meta(tenant)},
		ms(s.now()), caller, s.tolerance, s.scheduleDefault, s.scheduleByType)
	if err != nil {
		return nil, 0, backend("read request "+id, err)
	}
	switch r.code {
	case codeOK:
		ra, _ := r.rest[0].(int64)
		req, err := decodeRecord(id, r.rest[1:])
		return req, int(ra), err
	case codeNotFound:
		return nil, 0, domain.ErrNotFound()
	case codeFrozen:
		return nil, 0, errFrozen()
	case codeTooEarly:
		left, _ := r.rest[0].(int64)
		e := domain.Errorf(domain.PolledTooEarly, "Polled sooner than the Retry-After it was given; wait %d s.", left)
		e.RetryAfterSeconds = int(left)
		return nil, 0, e
	}
	return nil, 0, unexpected("read request", r)
}

// validID reports whether id is a canonical lower-case UUID, as the service makes
// them; anything else cannot exist and never reaches Redis.
func validID(id string) bool {
	if len(id) != 36 {
		return false
	}
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

// Events lists a request's status changes, oldest first.
func (s *Store) Events(ctx context.Context, tenant, id string) ([]domain.Event, error) {
	req, _, err := s.read(ctx, tenant, id, "")
	if err != nil {
		return nil, err
	}
	return req.Events, nil
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

// ExpireQueued expires a request still queued past its queued timeout. done is false
// when there was nothing to do (it moved on, or its deadline was extended).
func (s *Store) ExpireQueued(ctx context.Context, tenant, id string) (done bool, err error) {
	return s.timeout(ctx, tenant, id, domain.StatusExpired, "q", domain.FailureJSON("REQUEST_EXPIRED", "the request stayed queued longer than its queued timeout"))
}

// TimeOutProcessing fails a processing request whose heartbeat stopped.
func (s *Store) TimeOutProcessing(ctx context.Context, tenant, id string) (done bool, err error) {
	return s.timeout(ctx, tenant, id, domain.StatusFailed, "p", domain.FailureJSON("ERR_JOB_EXECUTION_TIMED_OUT", "no heartbeat within the processing timeout"))
}

func (s *Store) timeout(ctx context.Context, tenant, id string, to domain.Status, guard string, failure json.RawMessage) (bool, error) {
	_, err := s.transition(ctx, domain.TransitionParams{Tenant: tenant, ID: id, By: SystemActor}, "timeout", to, string(failure), "", guard)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errNothingToDo), domain.ErrorCode(err) == domain.NotFound:
		return false, nil
	}
	return false, err
}

var errNothingToDo = errors.New("nothing to do")

func (s *Store) transition(ctx context.Context, p domain.TransitionParams, op string, to domain.Status, payload, resultType, guard string) (*domain.Request, error) {
	if !validID(p.ID) {
		return nil, domain.ErrNotFound()
	}
	keys := []string{s.k.record(p.Tenant, p.ID), s.k.statusSet(p.Tenant, domain.StatusQueued),
		s.k.statusSet(p.Tenant, domain.StatusProcessing), s.k.statusSet(p.Tenant, to),
		s.k.deadlines(p.Tenant), s.k.retention(p.Tenant)}
	fp := ""
	if p.IdemKey != "" {
		keys = append(keys, s.idemKey(p.Tenant, op, p.ID, p.IdemKey))
		fp = fingerprint(op, payload, resultType)
	}
	r, err := s.run(ctx, s.sc.transition, keys, statusCode[to], ms(s.now()), p.By, payload, resultType, guard,
		s.opts.ProcessingTimeout.Milliseconds(), s.processingByType,
		s.opts.Retention.Milliseconds(), s.retentionByType,
		fp, s.opts.IdempotencyTTL.Milliseconds(), p.ID)
	if err != nil {
		return nil, backend(op+" request "+p.ID, err)
	}
	switch r.code {
	case codeOK, codeReplay:
		return decodeRecord(p.ID, r.rest)
	case codeNotFound:
		return nil, domain.ErrNotFound()
	case codeIdemReused:
		return nil, errIdemReused()
	case codeTerminal:
		cur, err := decodeRecord(p.ID, r.rest)
		if err != nil {
			return nil, err
		}
		e := domain.Errorf(domain.AlreadyTerminal, "The request is already %s; its status can no longer change.", cur.Status)
		e.Request = cur
		return nil, e
	case codeNothingToDo:
		return nil, errNothingToDo
	}
	return nil, unexpected(op+" request", r)
}

// Delete removes a request and everything that belongs to it.
func (s *Store) Delete(ctx context.Context, tenant, id string) error {
	if !validID(id) {
		return domain.ErrNotFound()
	}
	rec := s.k.record(tenant, id)
	for attempt := 0; attempt < 3; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		typ, err := s.rdb.HGet(cctx, rec, "t").Result()
		cancel()
		if errors.Is(err, redis.Nil) {
			return domain.ErrNotFound()
		}
		if err != nil {
			return backend("delete request "+id, err)
		}
		keys := []string{rec}
		for _, st := range domain.Statuses {
			keys = append(keys, s.k.statusSet(tenant, st))
		}
		keys = append(keys, s.k.typeSet(tenant, typ), s.k.deadlines(tenant), s.k.retention(tenant))
		r, err := s.run(ctx, s.sc.remove, keys, id, typ, ms(s.now()))
		if err != nil {
			return backend("delete request "+id, err)
		}
		switch r.code {
		case codeOK:
			return nil
		case codeNotFound:
			return domain.ErrNotFound()
		case codeRetry:
			continue
		default:
			return unexpected("delete request", r)
		}
	}
	return backend("delete request "+id, errors.New("record kept changing"))
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

// Ready checks that Redis answers and has the scripts, loading them if it lost them
// (a restart empties the script cache).
func (s *Store) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return backend("ping", err)
	}
	all := s.sc.all()
	hashes := make([]string, len(all))
	for i, sc := range all {
		hashes[i] = sc.Hash()
	}
	ok, err := s.rdb.ScriptExists(ctx, hashes...).Result()
	if err != nil {
		return backend("script exists", err)
	}
	for i, exists := range ok {
		if !exists {
			if err := all[i].Load(ctx, s.rdb).Err(); err != nil {
				return backend("script load", err)
			}
		}
	}
	return nil
}

// MaxmemoryPolicy reads Redis's eviction policy ("" when Redis has no CONFIG, as
// the embedded store).
func (s *Store) MaxmemoryPolicy(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	v, err := s.rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", fmt.Errorf("config get maxmemory-policy: %w", err)
	}
	return v["maxmemory-policy"], nil
}
