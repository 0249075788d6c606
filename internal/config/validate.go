package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// minPollTokenSecret is the shortest accepted HMAC key: 256 bits, the size of
// the SHA-256 block output, so the secret is never the weak link.
const minPollTokenSecret = 32

// problems collects every invalid key, so that one run reports them all
// instead of making the operator fix them one restart at a time.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

func (p *problems) positive(key string, d time.Duration) {
	if d <= 0 {
		p.add(key, "must be greater than 0, got %s", formatDuration(d))
	}
}

func (p *problems) nonNegative(key string, d time.Duration) {
	if d < 0 {
		p.add(key, "must not be negative, got %s", formatDuration(d))
	}
}

// Validate checks every key and returns all problems found, one per line, each
// starting with the dotted key it is about; nil when the configuration is
// usable.
func (c *Config) Validate() error {
	var p problems
	c.Redis.validate(&p)
	c.HTTP.validate(&p)
	c.Auth.validate(&p)
	c.Polling.validate(&p)
	c.RateLimit.validate(&p)
	c.Lifecycle.validate(&p)
	c.Retention.validate(&p)
	c.Wait.validate(&p)

	p.positive("idempotency.ttl", c.Idempotency.TTL)
	if c.Limits.ContextBytes <= 0 {
		p.add("limits.context_bytes", "must be greater than 0, got %d", c.Limits.ContextBytes)
	}
	if c.Limits.ResultBytes <= 0 {
		p.add("limits.result_bytes", "must be greater than 0, got %d", c.Limits.ResultBytes)
	}

	p.positive("webhooks.timeout", c.Webhooks.Timeout)
	if len(c.Webhooks.RetrySchedule) == 0 {
		p.add("webhooks.retry_schedule", "must list at least one step")
	}
	for _, d := range c.Webhooks.RetrySchedule {
		if d <= 0 {
			p.add("webhooks.retry_schedule", "step %s must be greater than 0", formatDuration(d))
		}
	}

	c.Audit.validate(&p)
	if c.Console.Enabled() {
		if _, _, err := net.SplitHostPort(c.Console.Addr); err != nil {
			p.add("console.addr", "must be [host]:port, or \"\" or \"off\" (console off), got %q", c.Console.Addr)
		}
	}
	p.positive("console.session_ttl", c.Console.SessionTTL)
	c.Tracing.validate(&p)
	if c.Metrics.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Addr); err != nil {
			p.add("metrics.addr", "must be [host]:port, or \"\" (/metrics on http.addr), got %q", c.Metrics.Addr)
		}
	}

	if c.Runtime.MaxProcs < 0 {
		p.add("runtime.max_procs", "must be >= 0 (0: Go's default), got %d", c.Runtime.MaxProcs)
	}
	if c.Runtime.GCPercent < 0 {
		p.add("runtime.gc_percent", "must be >= 0 (0: Go's default, 100), got %d", c.Runtime.GCPercent)
	}
	if c.Runtime.MemoryLimitBytes < -1 {
		p.add("runtime.memory_limit_bytes", "must be -1 (none), 0 (from the cgroup's memory.max) or a number of bytes, got %d", c.Runtime.MemoryLimitBytes)
	}
	switch c.Log.Format {
	case "json", "text":
	default:
		p.add("log.format", "must be json or text, got %q", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	return errors.Join(p...)
}

// MinSecretKey is the shortest accepted auth.poll_token_secret and
// webhooks.secret_key: 256 bits, so that the key is never the weak link.
const MinSecretKey = minPollTokenSecret

// ValidateServe is Validate plus the rules only serve needs: the secrets that
// every replica must share and that must survive restarts, required when
// Redis is configured (the embedded store, which lives and dies with one
// process, makes random ones). It returns every problem at once, the
// secrets' among the others. The admin commands and Load do without these
// rules: they hand out and check no token and seal no secret.
func (c *Config) ValidateServe() error {
	var p problems
	if err := c.Validate(); err != nil {
		p = append(p, flatten(err)...)
	}
	if err := c.RequirePollTokenSecret(); err != nil {
		p = append(p, err)
	}
	c.Webhooks.validateSecrets(&p, c.Embedded())
	return errors.Join(p...)
}

// RequirePollTokenSecret fails when Redis is configured but
// auth.poll_token_secret is not. Poll tokens are derived from request ids with
// this key, so every replica must share it and it must survive restarts; only
// the embedded store may use a random one.
func (c *Config) RequirePollTokenSecret() error {
	if !c.Embedded() && c.Auth.PollTokenSecret == "" {
		return fmt.Errorf("auth.poll_token_secret: required when Redis is configured (set %s to at least %d random bytes)",
			EnvName("auth.poll_token_secret"), minPollTokenSecret)
	}
	return nil
}

// validateSecrets: webhooks.secret_key encrypts endpoint secrets at rest.
func (w *Webhooks) validateSecrets(p *problems, embedded bool) {
	if !w.Enabled {
		return
	}
	switch {
	case w.SecretKey != "" && len(w.SecretKey) < MinSecretKey:
		// Never echo the key, only its length.
		p.add("webhooks.secret_key", "must be at least %d bytes, got %d (set %s)", MinSecretKey, len(w.SecretKey), EnvName("webhooks.secret_key"))
	case w.SecretKey == "" && len(w.PreviousSecretKeys) > 0:
		p.add("webhooks.previous_secret_keys", "set only with webhooks.secret_key, the key secrets are sealed under now (set %s)",
			EnvName("webhooks.secret_key"))
	case w.SecretKey == "" && !embedded:
		p.add("webhooks.secret_key", "required when Redis is configured and webhooks.enabled is true "+
			"(set %s to at least %d random bytes, or set webhooks.enabled to false)", EnvName("webhooks.secret_key"), MinSecretKey)
	}
	for i, k := range w.PreviousSecretKeys {
		if len(k) < MinSecretKey {
			p.add("webhooks.previous_secret_keys", "key %d of %d must be at least %d bytes (set %s)",
				i+1, len(w.PreviousSecretKeys), MinSecretKey, EnvName("webhooks.previous_secret_keys"))
		}
	}
}

func (r *Redis) validate(p *problems) {
	var stores []string
	if r.URL != "" {
		stores = append(stores, "redis.url")
		validateRedisURL(p, r.URL)
	}
	if len(r.ClusterAddrs) > 0 {
		stores = append(stores, "redis.cluster_addrs")
		validateAddrs(p, "redis.cluster_addrs", r.ClusterAddrs)
	}
	if r.SentinelMaster != "" {
		stores = append(stores, "redis.sentinel_master")
		if len(r.SentinelAddrs) == 0 {
			p.add("redis.sentinel_addrs", "required when redis.sentinel_master is set")
		}
	}
	if len(r.SentinelAddrs) > 0 {
		// Addresses without a master name would silently fall back to the
		// embedded store, which is surely not what was meant.
		if r.SentinelMaster == "" {
			p.add("redis.sentinel_master", "required when redis.sentinel_addrs is set")
		}
		validateAddrs(p, "redis.sentinel_addrs", r.SentinelAddrs)
	}
	if len(stores) > 1 {
		p.add("redis", "set only one of redis.url, redis.cluster_addrs, redis.sentinel_master; got %s",
			strings.Join(stores, " and "))
	}

	switch {
	case r.KeyPrefix == "":
		p.add("redis.key_prefix", "must not be empty")
	case strings.ContainsAny(r.KeyPrefix, "{}"):
		// A brace in the prefix would become the cluster hash tag instead of
		// {<tenant>}, putting every tenant into one slot.
		p.add("redis.key_prefix", "must not contain { or }, got %q", r.KeyPrefix)
	}
	// 256: a shard index is one byte of a request id (store.MaxTenantShards)
	if r.TenantShards < 0 || r.TenantShards > 256 {
		p.add("redis.tenant_shards", "must be 0 (the default: 16 on a Cluster, else 1) or 1..256, got %d", r.TenantShards)
	}
	p.positive("redis.op_timeout", r.OpTimeout)
	if r.PoolSize < 0 {
		p.add("redis.pool_size", "must not be negative (0 means the go-redis default), got %d", r.PoolSize)
	}
	if r.WaitReplicas < 0 {
		p.add("redis.wait_replicas", "must not be negative, got %d", r.WaitReplicas)
	}
	// WAIT with timeout 0 blocks forever, which would turn a lost replica
	// into hung writes.
	if r.WaitReplicas > 0 {
		p.positive("redis.wait_timeout", r.WaitTimeout)
	} else {
		p.nonNegative("redis.wait_timeout", r.WaitTimeout)
	}
}

func validateRedisURL(p *problems, raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		// err quotes the whole URL, password included: keep it out of logs.
		p.add("redis.url", "is not a valid URL")
		return
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		p.add("redis.url", "scheme must be redis:// or rediss://, got %q", u.Scheme)
		return
	}
	if u.Host == "" {
		p.add("redis.url", "has no host")
	}
}

func validateAddrs(p *problems, key string, addrs []string) {
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			p.add(key, "%q is not host:port", a)
		}
	}
}

func (h *HTTP) validate(p *problems) {
	if _, _, err := net.SplitHostPort(h.Addr); err != nil {
		p.add("http.addr", "%q is not [host]:port", h.Addr)
	}
	if h.PublicURL != "" {
		u, err := url.Parse(h.PublicURL)
		switch {
		case err != nil:
			p.add("http.public_url", "is not a valid URL")
		case u.Scheme != "http" && u.Scheme != "https":
			p.add("http.public_url", "must be an absolute http:// or https:// URL, got %q", h.PublicURL)
		case u.Host == "":
			p.add("http.public_url", "has no host")
		case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			// Request URLs are built by appending paths to it.
			p.add("http.public_url", "must not have a query or fragment, got %q", h.PublicURL)
		}
	}
	for _, a := range h.TrustedProxies {
		if !validProxy(a) {
			p.add("http.trusted_proxies", "%q is not an IP address or a CIDR range", a)
		}
	}
	if h.BodyLimitBytes <= 0 {
		p.add("http.body_limit_bytes", "must be greater than 0, got %d", h.BodyLimitBytes)
	}
	// 0 is the server's "no timeout", a legitimate if unwise choice.
	p.nonNegative("http.read_timeout", h.ReadTimeout)
	p.nonNegative("http.write_timeout", h.WriteTimeout)
	p.nonNegative("http.idle_timeout", h.IdleTimeout)
	p.nonNegative("http.shutdown_timeout", h.ShutdownTimeout)
	for _, o := range h.CORS.AllowedOrigins {
		if o != "*" && !validOrigin(o) {
			p.add("http.cors.allowed_origins", "%q is not an origin (scheme://host[:port], nothing else) or *", o)
		}
	}
}

// validOrigin reports whether o is a serialized origin (RFC 6454), as browsers
// send it in Origin: http or https, a host, an optional port, no path.
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil &&
		u.Path == "" && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" && u.Opaque == "" &&
		o == u.Scheme+"://"+u.Host
}

func (w *Wait) validate(p *problems) {
	switch {
	case w.Max < time.Second:
		p.add("wait.max", "must be at least 1s, got %s", formatDuration(w.Max))
	case w.Max%time.Second != 0:
		p.add("wait.max", "must be a whole number of seconds, got %s", formatDuration(w.Max))
	}
	if w.MaxWaiters < 0 {
		p.add("wait.max_waiters", "must not be negative, got %d", w.MaxWaiters)
	}
	if w.MaxWaitersPerTenant < 0 {
		p.add("wait.max_waiters_per_tenant", "must not be negative, got %d", w.MaxWaitersPerTenant)
	}
	if w.MaxWaitersPerCredential < 0 {
		p.add("wait.max_waiters_per_credential", "must not be negative, got %d", w.MaxWaitersPerCredential)
	}
	p.positive("wait.heartbeat", w.Heartbeat)
	p.positive("wait.stream_max", w.StreamMax)
	p.positive("wait.replay_window", w.ReplayWindow)
	if w.ReplayEntries < 1 {
		p.add("wait.replay_entries", "must be at least 1, got %d", w.ReplayEntries)
	}
}

func (a *Auth) validate(p *problems) {
	if n := len(a.KeyCheckSecret); n > 0 && n < minPollTokenSecret {
		p.add("auth.key_check_secret", "must be at least %d bytes, got %d", minPollTokenSecret, n)
	}
	if n := len(a.PollTokenSecret); n > 0 && n < minPollTokenSecret {
		// Never echo the secret, only its length.
		p.add("auth.poll_token_secret", "must be at least %d bytes, got %d", minPollTokenSecret, n)
	}
	p.nonNegative("auth.key_cache_ttl", a.KeyCacheTTL)
}

func (pl *Polling) validate(p *problems) {
	validateSchedule(p, "polling.schedule", pl.Schedule)
	for _, typ := range slices.Sorted(maps.Keys(pl.ByType)) {
		key := "polling.by_type[" + typ + "]"
		validateType(p, key, typ)
		validateSchedule(p, key, pl.ByType[typ])
	}
	// Written so that NaN fails too.
	if !(pl.EarlyTolerance >= 0 && pl.EarlyTolerance < 1) {
		p.add("polling.early_tolerance", "must be at least 0 and less than 1, got %v", pl.EarlyTolerance)
	}
}

// validateSchedule enforces whole seconds because Retry-After carries whole
// seconds, and the 60s cap keeps a client from being told to go away for long.
func validateSchedule(p *problems, key string, steps []time.Duration) {
	if len(steps) == 0 {
		p.add(key, "must list at least one step")
	}
	for _, d := range steps {
		if d < time.Second || d > time.Minute || d%time.Second != 0 {
			p.add(key, "step %s is not a whole number of seconds between 1s and 60s", formatDuration(d))
		}
	}
}

// validateType: by_type keys must be types a request can actually have, or the
// override would never apply.
func validateType(p *problems, key, typ string) {
	if !domain.ValidType(typ) {
		p.add(key, "%q is not a request type (%s)", typ, domain.TypePattern)
	}
}

func (r *RateLimit) validate(p *problems) {
	// Checked even when disabled, so that enabling later cannot fail at start.
	for _, rate := range []struct{ key, val string }{
		{"ratelimit.read", r.Read},
		{"ratelimit.write", r.Write},
		{"ratelimit.admin", r.Admin},
		{"ratelimit.tenant", r.Tenant},
	} {
		if _, _, err := parseRate(rate.val); err != nil {
			p.add(rate.key, "%v", err)
		}
	}
	p.positive("ratelimit.timeout", r.Timeout)
}

// parseRate checks ulule/limiter's rate notation "<limit>-<period>" with period
// S, M, H or D (either case, as ulule accepts). It is stricter than ulule in
// one way: the limit must be a positive plain integer, because a limit of 0
// would reject every request; ratelimit.enabled is the way to switch off.
func parseRate(s string) (limit int64, period time.Duration, err error) {
	bad := fmt.Errorf("invalid rate %q: want <positive integer>-<S|M|H|D>, e.g. 100-S or 5000-M", s)
	n, unit, ok := strings.Cut(s, "-")
	if !ok || n == "" || strings.TrimLeft(n, "0123456789") != "" {
		return 0, 0, bad
	}
	limit, err = strconv.ParseInt(n, 10, 64)
	if err != nil || limit <= 0 {
		return 0, 0, bad
	}
	switch strings.ToUpper(unit) {
	case "S":
		period = time.Second
	case "M":
		period = time.Minute
	case "H":
		period = time.Hour
	case "D":
		period = 24 * time.Hour
	default:
		return 0, 0, bad
	}
	return limit, period, nil
}

func (l *Lifecycle) validate(p *problems) {
	p.positive("lifecycle.queued_timeout", l.QueuedTimeout)
	p.positive("lifecycle.processing_timeout", l.ProcessingTimeout)
	for _, typ := range slices.Sorted(maps.Keys(l.ByType)) {
		key := "lifecycle.by_type[" + typ + "]"
		validateType(p, key, typ)
		o := l.ByType[typ]
		p.nonNegative(key+".queued_timeout", o.QueuedTimeout)
		p.nonNegative(key+".processing_timeout", o.ProcessingTimeout)
	}
	// Every tick scans the indexes; faster than this would load Redis for no
	// benefit, since timeouts are minutes to hours.
	if l.SweepInterval < 100*time.Millisecond {
		p.add("lifecycle.sweep_interval", "must be at least 100ms, got %s", formatDuration(l.SweepInterval))
	}
	if l.SweepBatch <= 0 {
		p.add("lifecycle.sweep_batch", "must be greater than 0, got %d", l.SweepBatch)
	}
}

func (r *Retention) validate(p *problems) {
	p.nonNegative("retention.terminal", r.Terminal)
	for _, typ := range slices.Sorted(maps.Keys(r.ByType)) {
		key := "retention.by_type[" + typ + "]"
		validateType(p, key, typ)
		p.nonNegative(key, r.ByType[typ])
	}
}

// formatDuration prints d in Go syntax without the zero tails that
// time.Duration.String adds: 15m instead of 15m0s, 24h instead of 24h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func (a *Audit) validate(p *problems) {
	switch a.Sink {
	case "log", "none":
	case "file":
		if a.File == "" {
			p.add("audit.file", "required when audit.sink is file")
		}
	default:
		p.add("audit.sink", "must be log, file or none, got %q", a.Sink)
	}
	if a.FileMaxBytes <= 0 {
		p.add("audit.file_max_bytes", "must be greater than 0, got %d", a.FileMaxBytes)
	}
	if a.FileKeep < 0 {
		p.add("audit.file_keep", "must be >= 0, got %d", a.FileKeep)
	}
	if a.MaxBacklog <= 0 {
		p.add("audit.max_backlog", "must be greater than 0, got %d", a.MaxBacklog)
	}
	p.positive("audit.claim_after", a.ClaimAfter)
}

// validProxy reports whether a is an IP address or a CIDR range, as
// http.trusted_proxies takes them.
func validProxy(a string) bool {
	if strings.Contains(a, "/") {
		_, _, err := net.ParseCIDR(a)
		return err == nil
	}
	return net.ParseIP(a) != nil
}

func (t *Tracing) validate(p *problems) {
	if t.OTLPEndpoint != "" {
		u, err := url.Parse(t.OTLPEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("tracing.otlp_endpoint", "must be an http:// or https:// URL, or \"\" (off), got %q", maskURL(t.OTLPEndpoint))
		}
	}
	if t.SampleRatio < 0 || t.SampleRatio > 1 || t.SampleRatio != t.SampleRatio {
		p.add("tracing.sample_ratio", "must be between 0 and 1, got %g", t.SampleRatio)
	}
	if t.ServiceName == "" {
		p.add("tracing.service_name", "must not be empty")
	}
}
