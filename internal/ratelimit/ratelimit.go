// Package ratelimit owns the rate policy of docs/reference.md §5: the parsed rates
// (Rates, which the store's scripts count for the calls they serve), the
// spelling of the counters (CounterKeys), and a Limiter on ulule/limiter's
// Redis store for the calls no script counts (listings, webhook management;
// docs/pacing.md).
//
// Every Allow counts one request against two fixed windows (ulule's model: a
// window starts at a key's first hit and lasts one period):
//
//   - the credential's budget for the route's scope,
//     key <prefix>:{<tenant>}:rl:<scope>:<keyID>
//   - the tenant's budget, key <prefix>:{<tenant>}:rl:tenant
//
// Both keys carry the tenant hash tag, so they live on the tenant's cluster
// slot; CounterKeys spells them, for this package and for the store's
// scripts, which count the calls they serve themselves (docs/pacing.md). The
// tenant window is counted only when the credential window allows the
// request: a credential that keeps hammering after being refused spends only
// its own budget, not that of its sibling credentials.
//
// Allow never blocks traffic on Redis trouble: a store error, or a store call
// slower than Config.Timeout, lets the request through uncounted (fail open),
// counts it in FailOpenCount and logs at most once a minute. Count gives the
// caller the error instead (ErrorCount), for the scopes that must not pass
// uncounted.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	redisstore "github.com/ulule/limiter/v3/drivers/store/redis"
)

// Scopes understood by Allow.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
	ScopeAdmin = "admin"
)

// failOpenLogEvery bounds how often a failing store is logged.
const failOpenLogEvery = time.Minute

// CounterKeys spells the two counters one call of credential, for a route
// needing scope, is counted on: the credential's and the tenant's, both under
// the hash tag tag ("{<tenant>}", or the tag of the record the call is about).
// They come without the Redis key prefix and its ':', which ulule's store and
// the store's keys add. The one place that spells them: the limiter and the
// scripts count on the same counters.
func CounterKeys(tag, scope, credential string) (cred, tenant string) {
	return tag + ":rl:" + scope + ":" + credential, tag + ":rl:tenant"
}

// Rate is one limit: Limit calls per Period (ulule's).
type Rate = limiter.Rate

// Rates are the configured limits, parsed: per credential for each scope, and
// per tenant. A zero Rate (Limit 0) is one nobody counts.
type Rates struct {
	Read, Write, Admin, Tenant Rate
}

// ParseRates parses the rates of cfg (ulule notation).
func ParseRates(cfg Config) (Rates, error) {
	var r Rates
	for _, x := range []struct {
		name, value string
		dst         *limiter.Rate
	}{
		{ScopeRead, cfg.Read, &r.Read}, {ScopeWrite, cfg.Write, &r.Write},
		{ScopeAdmin, cfg.Admin, &r.Admin}, {"tenant", cfg.Tenant, &r.Tenant},
	} {
		rate, err := ParseRate(x.value)
		if err != nil {
			return Rates{}, fmt.Errorf("ratelimit: %s rate: %w", x.name, err)
		}
		*x.dst = rate
	}
	return r, nil
}

// For is the per-credential rate of scope; zero for an unknown scope.
func (r Rates) For(scope string) limiter.Rate {
	switch scope {
	case ScopeRead:
		return r.Read
	case ScopeWrite:
		return r.Write
	case ScopeAdmin:
		return r.Admin
	}
	return limiter.Rate{}
}

// Counts reports whether calls of scope are limited at all: both their
// credential's rate and the tenant's are set.
func (r *Rates) Counts(scope string) bool {
	return r != nil && r.For(scope).Limit > 0 && r.Tenant.Limit > 0
}

// Config configures a Limiter. Rates are in ulule's notation: "<limit>-<period>"
// with period S, M, H or D, e.g. "50-S", "5000-M".
type Config struct {
	Enabled bool
	Read    string
	Write   string
	Admin   string
	Tenant  string
	// Timeout bounds the store work of one Allow or Count (both windows
	// together); a slower Allow fails open, a slower Count answers an error.
	// Required (> 0) when Enabled.
	Timeout time.Duration
	// Prefix is the Redis key prefix (redis.key_prefix), e.g. "as". Empty means
	// "as". It must not contain '{' or '}' (the tenant hash tag must be the
	// first one in every key).
	Prefix string
}

// Decision is the answer for one request: numbers, of which the HTTP layer
// makes the headers.
type Decision struct {
	Allowed bool
	// Limit, Remaining and Reset describe the binding window: the one that
	// refused the request, otherwise the one with fewer requests left. All
	// zero when the decision carries no limit information (limiting disabled,
	// or failed open).
	Limit     int64
	Remaining int64
	// Reset is when the binding window resets. ulule reports it to the
	// second, truncated; it is rounded up here, so it may be up to 1 s late
	// but is never early.
	Reset time.Time
	// RetryAfter is set when !Allowed: whole seconds, at least 1.
	RetryAfter time.Duration
	// FailedOpen: the store failed or timed out; allowed without counting.
	FailedOpen bool
}

// Headers returns the rate-limit response headers for d: RateLimit-Limit,
// RateLimit-Remaining, RateLimit-Reset (whole seconds until Reset, >= 0) and,
// when the request is refused, Retry-After (whole seconds, >= 1). It returns
// an empty map when d carries no limit information (disabled, failed open).
func (d Decision) Headers() map[string]string {
	return d.headersAt(time.Now())
}

func (d Decision) headersAt(now time.Time) map[string]string {
	h := make(map[string]string, 4)
	if d.Limit > 0 {
		h["RateLimit-Limit"] = strconv.FormatInt(d.Limit, 10)
		h["RateLimit-Remaining"] = strconv.FormatInt(max(d.Remaining, 0), 10)
		h["RateLimit-Reset"] = strconv.FormatInt(ceilSeconds(d.Reset.Sub(now)), 10)
	}
	if !d.Allowed {
		h["Retry-After"] = strconv.FormatInt(max(ceilSeconds(d.RetryAfter), 1), 10)
	}
	return h
}

// ceilSeconds rounds d up to whole seconds; negative durations give 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// Limiter applies the rate limits. It is safe for concurrent use.
type Limiter struct {
	enabled bool
	timeout time.Duration
	log     *slog.Logger
	scopes  map[string]*limiter.Limiter // read-only after New
	tenant  *limiter.Limiter

	failOpen atomic.Uint64
	errs     atomic.Uint64 // Count calls answered with an error
	lastLog  atomic.Int64  // unix nanos of the last fail-open log line
	degraded atomic.Bool   // the store failed since its last answer
}

// New validates cfg and builds a Limiter on rdb. It does not need Redis to be
// reachable: ulule's Redis store loads its Lua scripts in its constructor,
// so New hands it a client wrapper whose SCRIPT LOAD is computed locally and
// whose EVALSHA falls back to EVAL on NOSCRIPT (go-redis Script.Run). New
// then tries to preload the scripts, bounded by cfg.Timeout and by ctx, and
// only logs a warning if that fails. When cfg.Enabled is false nothing else
// is checked and Redis is never used.
func New(ctx context.Context, cfg Config, rdb redis.UniversalClient, log *slog.Logger) (*Limiter, error) {
	if log == nil {
		log = slog.Default()
	}
	l := &Limiter{enabled: cfg.Enabled, timeout: cfg.Timeout, log: log}
	if !cfg.Enabled {
		return l, nil
	}
	if rdb == nil {
		return nil, errors.New("ratelimit: enabled but no Redis client")
	}
	if cfg.Timeout <= 0 {
		return nil, fmt.Errorf("ratelimit: timeout must be > 0, got %s", cfg.Timeout)
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = "as"
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("ratelimit: key prefix %q must not contain '{' or '}'", prefix)
	}

	rates, err := ParseRates(cfg)
	if err != nil {
		return nil, err
	}

	sc := &scriptClient{UniversalClient: rdb, scripts: make(map[string]*redis.Script)}
	store, err := redisstore.NewStoreWithOptions(sc, limiter.StoreOptions{Prefix: prefix})
	if err != nil { // cannot happen: scriptClient.ScriptLoad never fails
		return nil, fmt.Errorf("ratelimit: redis store: %w", err)
	}
	l.scopes = map[string]*limiter.Limiter{
		ScopeRead:  limiter.New(store, rates.Read),
		ScopeWrite: limiter.New(store, rates.Write),
		ScopeAdmin: limiter.New(store, rates.Admin),
	}
	l.tenant = limiter.New(store, rates.Tenant)

	// Best effort: load the scripts now so that the first requests use
	// EVALSHA straight away (on a cluster, SCRIPT LOAD reaches every shard).
	pctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if _, err := within(pctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, sc.preload(ctx)
	}); err != nil {
		log.Warn("ratelimit: Redis not reachable at start; requests pass unlimited until it is",
			"err", err)
	}
	return l, nil
}

// ParseRate parses and validates a rate in ulule's notation ("50-S", "5000-M").
func ParseRate(s string) (limiter.Rate, error) {
	if s == "" {
		return limiter.Rate{}, errors.New("empty (want e.g. \"50-S\" or \"5000-M\")")
	}
	rate, err := limiter.NewRateFromFormatted(s)
	if err != nil {
		return limiter.Rate{}, fmt.Errorf("%q: %v (want <limit>-<S|M|H|D>, e.g. \"50-S\")", s, err)
	}
	if rate.Limit < 1 {
		return limiter.Rate{}, fmt.Errorf("%q: limit must be at least 1", s)
	}
	return rate, nil
}

// FailOpenCount is how many Allow calls failed open (store error or timeout).
func (l *Limiter) FailOpenCount() uint64 { return l.failOpen.Load() }

// ErrorCount is how many Count calls answered an error (store error or timeout).
func (l *Limiter) ErrorCount() uint64 { return l.errs.Load() }

// Allow counts one request of credential keyID of tenant, for a route needing
// scope ("read", "write" or "admin"), against the credential's rate for that
// scope and then, if still allowed, against the tenant's rate; the answer is
// the tighter of the two. It never blocks longer than the configured Timeout
// (plus scheduling noise), whatever the Redis client's own timeouts are.
// An unknown scope is a programming error: it fails open and is logged.
func (l *Limiter) Allow(ctx context.Context, tenant, keyID, scope string) Decision {
	d, err := l.get(ctx, tenant, keyID, scope)
	if err != nil {
		return l.failedOpen(err)
	}
	return d
}

// Count is Allow without failing open: when the store fails or is slower
// than the Timeout, it answers the error (counted in ErrorCount), and the
// caller refuses the request rather than let it pass uncounted.
func (l *Limiter) Count(ctx context.Context, tenant, keyID, scope string) (Decision, error) {
	d, err := l.get(ctx, tenant, keyID, scope)
	if err != nil {
		l.errs.Add(1)
		return Decision{}, fmt.Errorf("ratelimit: count %s call of %s: %w", scope, keyID, err)
	}
	return d, nil
}

func (l *Limiter) get(ctx context.Context, tenant, keyID, scope string) (Decision, error) {
	if !l.enabled {
		return Decision{Allowed: true}, nil
	}
	cred, ok := l.scopes[scope]
	if !ok {
		return Decision{}, fmt.Errorf("unknown scope %q", scope)
	}

	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	d, err := within(ctx, func(ctx context.Context) (Decision, error) {
		return l.count(ctx, cred, tenant, keyID, scope)
	})
	if err != nil {
		l.degraded.Store(true)
		return Decision{}, err
	}
	if l.degraded.Load() && l.degraded.CompareAndSwap(true, false) {
		l.log.Info("ratelimit: Redis store answering again", "failed_open_total", l.failOpen.Load(),
			"errors_total", l.errs.Load())
	}
	return d, nil
}

// within runs f in its own goroutine and returns its result, or ctx's error
// as soon as ctx is done. This keeps a deadline even when the Redis client
// ignores context deadlines for socket I/O (go-redis without
// ContextTimeoutEnabled). The abandoned goroutine ends when f returns; the
// caller's cancel() stops its pool waits and retry back-offs.
func within[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("no answer from Redis in time: %w", context.Cause(ctx))
	}
}

func (l *Limiter) count(ctx context.Context, cred *limiter.Limiter, tenant, keyID, scope string) (Decision, error) {
	ck, tk := CounterKeys("{"+tenant+"}", scope, keyID)
	now := time.Now()
	c, err := cred.Get(ctx, ck)
	if err != nil {
		return Decision{}, fmt.Errorf("credential window: %w", err)
	}
	dc := decision(c, now)
	if !dc.Allowed {
		return dc, nil // refused: the tenant window is not spent
	}
	t, err := l.tenant.Get(ctx, tk)
	if err != nil {
		return Decision{}, fmt.Errorf("tenant window: %w", err)
	}
	return tighter(dc, decision(t, now)), nil
}

func decision(c limiter.Context, now time.Time) Decision {
	d := Decision{
		Allowed:   !c.Reached,
		Limit:     c.Limit,
		Remaining: c.Remaining,
		// ulule truncates the reset instant to the second: round it up.
		Reset: time.Unix(c.Reset+1, 0),
	}
	if c.Reached {
		d.Remaining = 0
		d.RetryAfter = time.Duration(max(ceilSeconds(d.Reset.Sub(now)), 1)) * time.Second
	}
	return d
}

// tighter picks the binding decision of two: a refusal over an allowance
// (the later-resetting refusal if both refuse), else the one with fewer
// requests left (the later reset on a tie).
func tighter(a, b Decision) Decision {
	switch {
	case a.Allowed != b.Allowed:
		if !a.Allowed {
			return a
		}
		return b
	case !a.Allowed:
		if b.Reset.After(a.Reset) {
			return b
		}
		return a
	case b.Remaining < a.Remaining, b.Remaining == a.Remaining && b.Reset.After(a.Reset):
		return b
	default:
		return a
	}
}

func (l *Limiter) failedOpen(err error) Decision {
	n := l.failOpen.Add(1)
	now := time.Now().UnixNano()
	last := l.lastLog.Load()
	if (last == 0 || now-last >= int64(failOpenLogEvery)) && l.lastLog.CompareAndSwap(last, now) {
		l.log.Warn("ratelimit: store failed; request allowed without counting (logged at most once a minute)",
			"err", err, "failed_open_total", n)
	}
	return Decision{Allowed: true, FailedOpen: true}
}

// scriptClient adapts a go-redis client to ulule's redis store so that the
// store never depends on SCRIPT LOAD having succeeded: ScriptLoad only
// registers the script and returns its SHA-1 (computed locally, as Redis
// does), and EvalSha of a registered script runs go-redis Script.Run, which
// sends EVALSHA and falls back to EVAL on NOSCRIPT (cold server, restart,
// SCRIPT FLUSH, new cluster shard).
type scriptClient struct {
	redis.UniversalClient

	mu      sync.RWMutex
	scripts map[string]*redis.Script // by SHA-1
}

var _ redisstore.Client = (*scriptClient)(nil)
var _ redisstore.Client = redis.UniversalClient(nil)

func (c *scriptClient) ScriptLoad(_ context.Context, src string) *redis.StringCmd {
	s := redis.NewScript(src)
	c.mu.Lock()
	c.scripts[s.Hash()] = s
	c.mu.Unlock()
	return redis.NewStringResult(s.Hash(), nil)
}

func (c *scriptClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c.mu.RLock()
	s := c.scripts[sha]
	c.mu.RUnlock()
	if s == nil {
		return c.UniversalClient.EvalSha(ctx, sha, keys, args...)
	}
	return s.Run(ctx, c.UniversalClient, keys, args...)
}

// preload sends SCRIPT LOAD for every registered script.
func (c *scriptClient) preload(ctx context.Context) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, s := range c.scripts {
		if err := s.Load(ctx, c.UniversalClient).Err(); err != nil {
			return err
		}
	}
	return nil
}
