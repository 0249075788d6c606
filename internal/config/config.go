// Package config defines asyncstatus's configuration: one YAML file plus
// ASYNCSTATUS_* environment overrides (docs/reference.md §9). It imports no internal package
// but two leaves that import nothing themselves: internal/defaults (the values it
// shares with the store and the HTTP server) and internal/domain (what a valid
// request type is). Every other package receives the parts it needs from main.
package config

import (
	"net"
	"time"
)

// Config is the whole effective configuration. The yaml tags are the dotted
// paths of docs/reference.md §9; the env override of a key is ASYNCSTATUS_ + its upper-snake
// path (redis.url -> ASYNCSTATUS_REDIS_URL).
type Config struct {
	Redis       Redis       `yaml:"redis"`
	HTTP        HTTP        `yaml:"http"`
	Auth        Auth        `yaml:"auth"`
	Polling     Polling     `yaml:"polling"`
	RateLimit   RateLimit   `yaml:"ratelimit"`
	Lifecycle   Lifecycle   `yaml:"lifecycle"`
	Retention   Retention   `yaml:"retention"`
	Idempotency Idempotency `yaml:"idempotency"`
	Limits      Limits      `yaml:"limits"`
	Webhooks    Webhooks    `yaml:"webhooks"`
	Audit       Audit       `yaml:"audit"`
	Log         Log         `yaml:"log"`
	Runtime     Runtime     `yaml:"runtime"`
	Console     Console     `yaml:"console"`
	Wait        Wait        `yaml:"wait"`
	Metrics     Metrics     `yaml:"metrics"`
	Tracing     Tracing     `yaml:"tracing"`
}

// Redis selects and tunes the store. None of URL, ClusterAddrs and
// SentinelMaster set means the embedded in-process store.
type Redis struct {
	// URL of a single Redis (redis:// or rediss://). Secret: the password is masked when printed.
	URL string `yaml:"url"`
	// ClusterAddrs are seed nodes of a Redis Cluster (host:port).
	ClusterAddrs []string `yaml:"cluster_addrs"`
	// SentinelMaster and SentinelAddrs select a Sentinel-managed master.
	SentinelMaster string   `yaml:"sentinel_master"`
	SentinelAddrs  []string `yaml:"sentinel_addrs"`
	// Password for cluster/sentinel nodes (URL carries its own). Secret.
	Password string `yaml:"password"`
	// KeyPrefix starts every key. default: "as".
	KeyPrefix string `yaml:"key_prefix"`
	// OpTimeout bounds every Redis call. default: 1s.
	OpTimeout time.Duration `yaml:"op_timeout"`
	// PoolSize per node; 0 = go-redis default (10 x GOMAXPROCS).
	PoolSize int `yaml:"pool_size"`
	// AutoPipeline sends the Lua script calls of concurrent requests together
	// through go-redis's autopipeliner (fewer syscalls at high load). default: true.
	AutoPipeline bool `yaml:"autopipeline"`
	// WaitReplicas > 0 makes every write wait for that many replicas (WAIT). default: 0.
	WaitReplicas int `yaml:"wait_replicas"`
	// WaitTimeout bounds the WAIT. default: 500ms.
	WaitTimeout time.Duration `yaml:"wait_timeout"`
	// TenantShards spreads each tenant's requests over that many hash tags, so
	// that one tenant uses every master of a Cluster (store.Options.TenantShards,
	// docs/operations.md, One tenant across the cluster): 1..256, may be raised
	// later, never lowered. 0 (the default) is DefaultClusterShards on a
	// Cluster and 1 elsewhere, where there is one server and shards only make
	// listings dearer. A Cluster deployment upgrading from a version before
	// shards sets 1 until every replica runs this version: an older replica
	// beside S > 1 answers 404 for the requests in the new shards.
	TenantShards int `yaml:"tenant_shards"`
}

// DefaultClusterShards is redis.tenant_shards on a Cluster when it is not
// set (docs/operations.md, One tenant across the cluster): 16 shards spread
// over up to 16 masters, sit 6/5/5 on 3 and 4 each on 4; creates without an
// Idempotency-Key draw a master first, so those even out whatever the split
// (measured on 3 masters: 34.2-35.2% of one tenant's commands on the
// busiest), and a listing page costs one call per master whatever S is. 32
// evens keyed load on 3 masters further but doubles the summaries a page
// reads and the indexes a page deep in the listing probes.
const DefaultClusterShards = 16

// Shards is redis.tenant_shards with 0 resolved: DefaultClusterShards on a
// Cluster, 1 elsewhere.
func (r Redis) Shards() int {
	if r.TenantShards > 0 {
		return r.TenantShards
	}
	if len(r.ClusterAddrs) > 0 {
		return DefaultClusterShards
	}
	return 1
}

// HTTP is the listener.
type HTTP struct {
	// Addr to listen on. default: ":8080". With the embedded store, an address
	// without a host (":8080") binds loopback only (APIAddr).
	Addr string `yaml:"addr"`
	// PublicURL, when set, is the base of absolute URLs (Location, Operation-Location, Link).
	PublicURL string `yaml:"public_url"`
	// TrustedProxies are the addresses (IPs or CIDRs, "10.0.0.0/8") of the
	// reverse proxies in front of the service: only a connection from one of
	// them may set the scheme and host of absolute URLs with X-Forwarded-Proto
	// (http or https, nothing else) and X-Forwarded-Host, when public_url is
	// not set. default: none (the headers are ignored).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// BodyLimitBytes: larger bodies answer 413. default: 1048576.
	BodyLimitBytes int `yaml:"body_limit_bytes"`
	// ReadTimeout, WriteTimeout, IdleTimeout of connections. defaults: 10s, 10s, 60s.
	ReadTimeout  time.Duration `yaml:"read_timeout"`
	WriteTimeout time.Duration `yaml:"write_timeout"`
	IdleTimeout  time.Duration `yaml:"idle_timeout"`
	// ShutdownTimeout: how long in-flight requests may finish on SIGTERM. default: 10s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// CORS lets pages on other origins call the API (docs/reference.md §13).
	CORS CORS `yaml:"cors"`
}

// CORS is the cross-origin policy of the API.
type CORS struct {
	// AllowedOrigins are the origins ("https://app.example.com", scheme, host
	// and port only) whose pages may call the API; "*" allows every origin.
	// default: none, and no CORS headers at all.
	AllowedOrigins []string `yaml:"allowed_origins"`
}

// Wait tunes waiting without polling (docs/reference.md §12): long polls (Prefer: wait=N)
// and event streams.
type Wait struct {
	// Max is the longest wait a long poll may ask for (Prefer: wait=N is clamped
	// to 1s..Max), whole seconds. default: 25s.
	Max time.Duration `yaml:"max"`
	// MaxWaiters bounds the long polls and streams held at once by one replica;
	// past it a long poll is answered as an ordinary poll. 0 turns waiting off.
	// default: 10000.
	MaxWaiters int `yaml:"max_waiters"`
	// MaxWaitersPerTenant bounds the waits one tenant may hold at once on one
	// replica, so that one tenant cannot deny waiting to the others; past it a
	// wait is answered as past max_waiters. 0: no share. default: 1000.
	MaxWaitersPerTenant int `yaml:"max_waiters_per_tenant"`
	// MaxWaitersPerCredential bounds the waits one API key, or the poll token
	// of one request, may hold at once on one replica. 0: no share.
	// default: 100.
	MaxWaitersPerCredential int `yaml:"max_waiters_per_credential"`
	// Heartbeat is the interval of an event stream's keep-alive comment, and how
	// soon a wait or stream whose client left frees its slot. default: 15s.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// StreamMax ends an event stream after this long; the client resumes with
	// Last-Event-ID. default: 10m.
	StreamMax time.Duration `yaml:"stream_max"`
	// ReplayWindow is how long a watch of many requests (docs/reference.md §16)
	// may resume from its Last-Event-ID: each tenant shard's change log keeps
	// that long while watched. default: 10m.
	ReplayWindow time.Duration `yaml:"replay_window"`
	// ReplayEntries bounds each tenant shard's change log too; a watch
	// resuming from before what was trimmed starts with a reset.
	// default: 20000.
	ReplayEntries int `yaml:"replay_entries"`
}

// Auth tunes credentials.
type Auth struct {
	// PollTokenSecret keys the HMAC that derives poll tokens from request ids, so that
	// tokens are never stored. Secret. Required (>= 32 bytes) when Redis is configured;
	// the embedded store makes a random one per process when empty.
	PollTokenSecret string `yaml:"poll_token_secret"`
	// KeyCacheTTL: how long a looked-up API key (and so a revocation) may be cached
	// in process. default: 10s. 0 disables the cache.
	KeyCacheTTL time.Duration `yaml:"key_cache_ttl"`
	// KeyCheckSecret is what the subkey of API keys' keyed check is derived
	// from. Secret. default: "" (PollTokenSecret). Set it to the previous
	// poll_token_secret when rotating that, so that keys keep their check.
	KeyCheckSecret string `yaml:"key_check_secret"`
	// AcceptLegacyKeys accepts API keys without the keyed check (issued before
	// it, or of the 63-character shape): each unknown one costs a lookup.
	// default: true (docs/operations.md says until when).
	AcceptLegacyKeys bool `yaml:"accept_legacy_keys"`
}

// Polling paces clients (docs/reference.md §5).
type Polling struct {
	// Schedule: the n-th non-terminal poll answers Retry-After = step n; the last repeats.
	// default: 1s,2s,5s,10s,30s. Each step a whole number of seconds in 1s..60s.
	Schedule []time.Duration `yaml:"schedule"`
	// ByType overrides Schedule for request types.
	ByType map[string][]time.Duration `yaml:"by_type"`
	// EarlyTolerance: a poll sooner than (1 - tolerance) x the last Retry-After is early. default: 0.2.
	EarlyTolerance float64 `yaml:"early_tolerance"`
}

// RateLimit are ulule/limiter rates ("100-S", "5000-M").
type RateLimit struct {
	// Enabled switches all rate limits. default: true.
	Enabled bool `yaml:"enabled"`
	// Read, Write, Admin: per credential, by the scope the route needs. defaults:
	// 50-S, 10000-S, 5-S (docs/pacing.md says why).
	Read  string `yaml:"read"`
	Write string `yaml:"write"`
	Admin string `yaml:"admin"`
	// Tenant: all credentials of one tenant together. default: 20000-S.
	Tenant string `yaml:"tenant"`
	// Timeout bounds the HTTP layer's own limiter call, made only for a call
	// refused before its script counted it (a bad body, query or id), and the
	// preloading of the limiter's scripts at start: slower, the refusal goes
	// out without RateLimit-* and uncounted. default: 200ms.
	Timeout time.Duration `yaml:"timeout"`
}

// Lifecycle timers (docs/reference.md §6).
type Lifecycle struct {
	// QueuedTimeout: queued longer than this -> expired (REQUEST_EXPIRED). default: 24h.
	QueuedTimeout time.Duration `yaml:"queued_timeout"`
	// ProcessingTimeout: processing without heartbeat this long -> failed
	// (ERR_JOB_EXECUTION_TIMED_OUT). default: 15m.
	ProcessingTimeout time.Duration `yaml:"processing_timeout"`
	// ByType overrides both timers per request type.
	ByType map[string]LifecycleOverride `yaml:"by_type"`
	// SweepInterval between sweeper ticks. default: 10s.
	SweepInterval time.Duration `yaml:"sweep_interval"`
	// SweepBatch bounds the records one tick handles per tenant. default: 500.
	SweepBatch int `yaml:"sweep_batch"`
}

// LifecycleOverride is a per-type timer override; zero means "use the default".
type LifecycleOverride struct {
	QueuedTimeout     time.Duration `yaml:"queued_timeout"`
	ProcessingTimeout time.Duration `yaml:"processing_timeout"`
}

// Retention of terminal records (docs/reference.md §6).
type Retention struct {
	// Terminal: records are deleted this long after completed_at. 0 keeps forever. default: 720h.
	Terminal time.Duration `yaml:"terminal"`
	// ByType overrides Terminal per request type.
	ByType map[string]time.Duration `yaml:"by_type"`
}

// Idempotency of POSTs.
type Idempotency struct {
	// TTL of an Idempotency-Key. default: 24h.
	TTL time.Duration `yaml:"ttl"`
}

// Limits on stored payloads.
type Limits struct {
	// ContextBytes: serialized create context at most. default: 4096.
	ContextBytes int `yaml:"context_bytes"`
	// ResultBytes: serialized answer result at most. default: 16384.
	ResultBytes int `yaml:"result_bytes"`
}

// Webhooks (docs/reference.md §10).
type Webhooks struct {
	// Enabled switches delivery and the /v1/webhooks endpoints. default: true.
	Enabled bool `yaml:"enabled"`
	// Timeout: a 2xx within this is a successful delivery. default: 5s.
	Timeout time.Duration `yaml:"timeout"`
	// RetrySchedule: waits before each retry; after the last the message is failed.
	// default: 5s,30s,2m,10m,30m,1h,2h,4h,8h.
	RetrySchedule []time.Duration `yaml:"retry_schedule"`
	// AllowHTTP and AllowPrivate lift the https-only and public-address-only
	// rules on endpoint URLs, for development and tests. defaults: false.
	AllowHTTP    bool `yaml:"allow_http"`
	AllowPrivate bool `yaml:"allow_private"`
	// SecretKey encrypts endpoint secrets at rest. Secret. Required (>= 32
	// bytes) by serve when Redis is configured and webhooks are enabled; the
	// embedded store uses a random one per process when empty.
	SecretKey string `yaml:"secret_key"`
	// PreviousSecretKeys are earlier values of SecretKey, for rotation: secrets
	// sealed under one of them still open, and `asyncstatus webhooks reseal`
	// seals them again under SecretKey. Secret. default: none.
	PreviousSecretKeys []string `yaml:"previous_secret_keys"`
}

// Audit is the audit trail (docs/operations.md, Audit trail): every create,
// transition, heartbeat and delete, written to a sink that outlives retention.
type Audit struct {
	// Sink: log (JSON lines on the service's log output, marked "msg":"audit"),
	// file (File, a file of its own) or none (no audit entries at all).
	// default: log.
	Sink string `yaml:"sink"`
	// File is the file the file sink appends to. Required with sink file; each
	// replica needs its own.
	File string `yaml:"file"`
	// FileMaxBytes: the file is rotated (renamed <file>.1, ...) before a batch
	// would take it past this size. default: 104857600 (100 MiB).
	FileMaxBytes int64 `yaml:"file_max_bytes"`
	// FileKeep: rotated files kept (<file>.1 .. <file>.N); older ones are
	// deleted. 0 keeps none. default: 10.
	FileKeep int `yaml:"file_keep"`
	// MaxBacklog: audit entries a tenant's backlog in Redis may hold while the
	// sink does not take them; past it, events are counted and reported as
	// dropped instead of recorded. default: 100000.
	MaxBacklog int `yaml:"max_backlog"`
	// ClaimAfter: how long one replica's read holds a tenant's audit stream;
	// entries it read and did not write within it (it died, or its sink
	// fails) are read again by another replica. default: 30s.
	ClaimAfter time.Duration `yaml:"claim_after"`
}

// Log output.
type Log struct {
	// Format: json or text. default: json.
	Format string `yaml:"format"`
	// Level: debug, info, warn, error. default: info.
	Level string `yaml:"level"`
}

// Runtime tunes the Go runtime of serve.
type Runtime struct {
	// MaxProcs caps the CPUs that run the service's code at once (GOMAXPROCS).
	// 0 leaves Go's choice: every CPU the process may use, a container's CPU
	// limit and a GOMAXPROCS environment variable included. default: 0.
	MaxProcs int `yaml:"max_procs"`
	// GCPercent is the garbage collector's target (GOGC): a collection starts
	// once the heap has grown this many per cent over what the last one left.
	// asyncstatus keeps little live (a few MB), so at Go's 100 it collected
	// many times a second under load; 400 spends that CPU on answers for some
	// tens of MB of heap (docs/operations.md, "Memory and the garbage collector").
	// 0 leaves Go's choice (100). A GOGC environment variable wins over
	// this key. default: 400.
	GCPercent int `yaml:"gc_percent"`
	// MemoryLimitBytes is the Go runtime's soft memory limit (GOMEMLIMIT):
	// near it the collector runs more often, whatever GCPercent says. 0 sets
	// 90% of the memory.max of the cgroup serve runs in (a container's
	// memory limit, a systemd unit's MemoryMax; memory.limit_in_bytes on
	// cgroup v1) when it has one, else none;
	// -1 none. A GOMEMLIMIT environment variable wins over this key.
	// default: 0.
	MemoryLimitBytes int64 `yaml:"memory_limit_bytes"`
}

// Console is the operator console (docs/reference.md §14, docs/console.md).
type Console struct {
	// Addr of the console's own listener. "" (or "off", which an environment
	// variable can say) turns the console off.
	// default: "127.0.0.1:8081" (loopback: reach it through your own access proxy).
	Addr string `yaml:"addr"`
	// SessionTTL: a console session ends this long after sign-in. default: 8h.
	SessionTTL time.Duration `yaml:"session_ttl"`
}

// Metrics is the Prometheus endpoint, /metrics, which needs no credential.
type Metrics struct {
	// Addr, when set, serves /metrics on a listener of its own ([host]:port),
	// and http.addr no longer serves it: for production, where the API is
	// public and the figures are not. default: "" (/metrics on http.addr).
	Addr string `yaml:"addr"`
}

// Tracing is OpenTelemetry tracing (docs/reference.md §17). With no endpoint
// it is off, and no span is made on any path.
type Tracing struct {
	// OTLPEndpoint is the OTLP/HTTP collector spans go to, as a URL
	// ("http://collector:4318"; the path /v1/traces is added when the URL has
	// none). default: "" (tracing off).
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// SampleRatio is the share of traces started here that are sampled, 0..1;
	// parent-based: a call whose traceparent says sampled (or not) is followed.
	// default: 1.0.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName is the service.name of every span. default: "asyncstatus".
	ServiceName string `yaml:"service_name"`
}

// APIAddr is the address serve's API listens on: http.addr, except that with
// the embedded store (development) an address without a host, such as the
// default ":8080", binds loopback only, as the console does. Name a host
// (0.0.0.0:8080) to listen on every interface anyway.
func (c *Config) APIAddr() string {
	host, port, err := net.SplitHostPort(c.HTTP.Addr)
	if err != nil || host != "" || !c.Embedded() {
		return c.HTTP.Addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// Enabled reports whether the console is to be served.
func (c Console) Enabled() bool { return c.Addr != "" && c.Addr != "off" }

// Embedded reports whether no Redis is configured.
func (c *Config) Embedded() bool {
	return c.Redis.URL == "" && len(c.Redis.ClusterAddrs) == 0 && c.Redis.SentinelMaster == ""
}
