package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/buildinfo"
	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// tenantRunFlags parses the flags of a command that walks every tenant or one:
// [--tenant T] [--dry-run] [--config FILE], nothing else. name is the command
// ("retention reapply"), every the --tenant default's description.
func tenantRunFlags(name, every string, args []string, stderr io.Writer) (tenant string, dry bool, cfgPath string, err error) {
	fs, cfgPath, err := flags(name, args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&tenant, "tenant", "", "only this tenant (default: "+every+")")
		fs.BoolVar(&dry, "dry-run", false, "count what would change, change nothing")
	})
	if err != nil {
		return "", false, "", err
	}
	if err := positional(name, fs, 0, ""); err != nil {
		return "", false, "", err
	}
	if tenant != "" && !auth.ValidTenant(tenant) {
		return "", false, "", usageError{name + ": --tenant must match ^[a-z0-9][a-z0-9_-]{0,62}$"}
	}
	return tenant, dry, cfgPath, nil
}

// loadConfig is the configuration of an admin command: --config FILE, else
// $ASYNCSTATUS_CONFIG, then the environment. Its error (config.Problems)
// names every problem at once.
func loadConfig(path string, getenv func(string) string) (config.Config, error) {
	if path == "" {
		path = getenv("ASYNCSTATUS_CONFIG")
	}
	return config.Load(path, getenv)
}

// loadServeConfig is loadConfig with serve's rules (config.ValidateServe):
// serve and `config check` load through it.
func loadServeConfig(path string, getenv func(string) string) (config.Config, error) {
	if path == "" {
		path = getenv("ASYNCSTATUS_CONFIG")
	}
	return config.LoadServe(path, getenv)
}

// Redis client retry policy (see openRedis).
const (
	maxRetries      = 2
	minRetryBackoff = 8 * time.Millisecond
	maxRetryBackoff = 100 * time.Millisecond
	clusterReload   = 2 * time.Second
)

// backend is the opened store and what must be closed with it.
type backend struct {
	store    *store.Store
	rdb      redis.UniversalClient
	embedded *store.Embedded
}

func (b *backend) Close() {
	if b.embedded != nil {
		b.embedded.Close()
		return
	}
	_ = b.rdb.Close()
}

// openRedis makes the client that the configuration names: a single Redis by URL,
// a cluster, a Sentinel-managed master, or the embedded store when none is set.
//
// Every call also carries a context deadline (redis.op_timeout, set by the store);
// the socket timeouts below are the backstop. Failure handling (docs/reference.md §11):
//   - a few quick retries (MaxRetries, short backoffs) so that a pooled connection
//     that died with a Redis restart costs no 503; retries stay within the deadline;
//   - a cluster client re-reads the slot map every clusterReload (and at once when
//     the store sees a node fail), so it follows a replica promoted by a failover;
//     it routes every command to the slot's master (no ReadOnly, no latency
//     routing): a replica may lag behind what was acknowledged;
//   - with redis.wait_replicas, a write's WAIT may take wait_timeout more.
func openRedis(cfg config.Config) (redis.UniversalClient, *store.Embedded, error) {
	r := cfg.Redis
	to := r.OpTimeout
	readTO := to
	if r.WaitReplicas > 0 {
		readTO += r.WaitTimeout // the write, then WAIT, in one pipeline
	}
	switch {
	case r.URL != "":
		o, err := redis.ParseURL(r.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("redis.url: %w", err)
		}
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = to, readTO, to, to
		o.ContextTimeoutEnabled = true
		o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff = maxRetries, minRetryBackoff, maxRetryBackoff
		if r.PoolSize > 0 {
			o.PoolSize = r.PoolSize
		}
		return redis.NewClient(o), nil, nil
	case len(r.ClusterAddrs) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.ClusterAddrs, Password: r.Password,
			DialTimeout: to, ReadTimeout: readTO, WriteTimeout: to, PoolTimeout: to, ContextTimeoutEnabled: true,
			PoolSize: r.PoolSize, MinRetryBackoff: minRetryBackoff, MaxRetryBackoff: maxRetryBackoff,
			ReadOnly: false, RouteByLatency: false, RouteRandomly: false,
			ClusterStateReloadInterval: clusterReload}), nil, nil
	case r.SentinelMaster != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: r.SentinelMaster, SentinelAddrs: r.SentinelAddrs,
			Password: r.Password, DialTimeout: to, ReadTimeout: readTO, WriteTimeout: to, PoolTimeout: to,
			ContextTimeoutEnabled: true, PoolSize: r.PoolSize, MaxRetries: maxRetries,
			MinRetryBackoff: minRetryBackoff, MaxRetryBackoff: maxRetryBackoff,
			ReplicaOnly: false, RouteByLatency: false, RouteRandomly: false}), nil, nil
	}
	e, err := store.NewEmbedded()
	if err != nil {
		return nil, nil, fmt.Errorf("start embedded store: %w", err)
	}
	return e.Client, e, nil
}

func storeOptions(cfg config.Config) store.Options {
	secs := func(ds []time.Duration) []int {
		out := make([]int, len(ds))
		for i, d := range ds {
			out[i] = int(d / time.Second)
		}
		return out
	}
	o := store.Options{
		Prefix: cfg.Redis.KeyPrefix, OpTimeout: cfg.Redis.OpTimeout,
		QueuedTimeout: cfg.Lifecycle.QueuedTimeout, ProcessingTimeout: cfg.Lifecycle.ProcessingTimeout,
		QueuedTimeoutByType: map[string]time.Duration{}, ProcessingTimeoutByType: map[string]time.Duration{},
		Retention: cfg.Retention.Terminal, RetentionByType: map[string]time.Duration{},
		IdempotencyTTL: cfg.Idempotency.TTL,
		Schedule:       secs(cfg.Polling.Schedule), ScheduleByType: map[string][]int{},
		EarlyTolerance: cfg.Polling.EarlyTolerance,
		WaitReplicas:   cfg.Redis.WaitReplicas, WaitTimeout: cfg.Redis.WaitTimeout,
		AutoPipeline: cfg.Redis.AutoPipeline,
		TenantShards: cfg.Redis.Shards(),
		// watches' change logs (docs/reference.md §16)
		ReplayWindow: cfg.Wait.ReplayWindow, ChangeLogEntries: cfg.Wait.ReplayEntries,
		// buckets as wide as a sweep interval: index entries go within two intervals
		RetentionBucket: cfg.Lifecycle.SweepInterval,
	}
	if cfg.Audit.Sink != "none" {
		o.AuditBacklog = cfg.Audit.MaxBacklog
	}
	// Per-type settings go to the store resolved (config's *For methods say
	// what an override inherits), so that the store, its scripts and the HTTP
	// layer only look a type up.
	for t := range cfg.Lifecycle.ByType {
		o.QueuedTimeoutByType[t], o.ProcessingTimeoutByType[t] = cfg.Lifecycle.TimeoutsFor(t)
	}
	for t := range cfg.Polling.ByType {
		o.ScheduleByType[t] = secs(cfg.Polling.ScheduleFor(t))
	}
	for t := range cfg.Retention.ByType {
		o.RetentionByType[t] = cfg.Retention.For(t)
	}
	// The scripts count the rate limits of the calls they serve, in the call's
	// own round trip, on the limiter's own counters (the rates were validated
	// with the config); the HTTP layer asks the store which scopes it counts.
	if r, err := rateLimits(cfg); err == nil && r != nil {
		o.RateLimits = r
	}
	return o
}

func openBackend(cfg config.Config) (*backend, error) {
	return openObservedBackend(cfg, nil, nil)
}

// openObservedBackend is openBackend with the store reporting every script call
// to obs (nil: to nobody), and tracing through tr (nil: off).
func openObservedBackend(cfg config.Config, obs store.ScriptObserver, tr store.Tracer) (*backend, error) {
	rdb, emb, err := openRedis(cfg)
	if err != nil {
		return nil, err
	}
	so := storeOptions(cfg)
	so.ScriptObserver = obs
	so.Tracer = tr
	if emb != nil {
		so.WaitReplicas = 0 // the embedded store has no replicas: WAIT would refuse every write
	}
	st, err := store.New(rdb, so)
	if err != nil {
		if emb != nil {
			emb.Close()
		}
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &backend{store: st, rdb: rdb, embedded: emb}, nil
}

// serveSecrets derives what serve needs from the configured secrets, and
// refuses a configuration that lacks them; config check applies the same rules.
// A refusal names every missing or unusable secret at once, so that a first
// deployment is not refused once per secret.
func serveSecrets(cfg config.Config) ([]byte, *webhook.Sealer, error) {
	secret, perr := pollSecret(cfg)
	sealer, werr := webhookSealer(cfg)
	if err := errors.Join(perr, werr); err != nil {
		return nil, nil, err
	}
	return secret, sealer, nil
}

// pollSecret is the poll-token HMAC key: configured, or random for the embedded
// store (whose data dies with the process anyway).
func pollSecret(cfg config.Config) ([]byte, error) {
	if cfg.Auth.PollTokenSecret != "" {
		return []byte(cfg.Auth.PollTokenSecret), nil
	}
	if err := cfg.RequirePollTokenSecret(); err != nil {
		return nil, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return b, nil
}

// newAuthenticator checks credentials with the configured secrets and key
// policy; pollSecret is serveSecrets' (random with the embedded store).
func newAuthenticator(cfg config.Config, keys auth.KeyStore, pollSecret []byte) *auth.Authenticator {
	return auth.NewWithOptions(keys, auth.Options{PollSecret: pollSecret, KeyCheckSecret: []byte(cfg.Auth.KeyCheckSecret),
		CacheTTL: cfg.Auth.KeyCacheTTL, RefuseLegacyKeys: !cfg.Auth.AcceptLegacyKeys})
}

// newMetrics makes the metrics on a registry of their own, with the Go runtime
// and process collectors, and names this build.
func newMetrics(build buildinfo.Info) (*metrics.Metrics, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	m, err := metrics.New(reg)
	if err != nil {
		return nil, err
	}
	m.SetBuildInfo(build)
	return m, nil
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Log.Level))
	o := &slog.HandlerOptions{Level: lvl}
	if cfg.Log.Format == "text" {
		return slog.New(slog.NewTextHandler(w, o))
	}
	return slog.New(slog.NewJSONHandler(w, o))
}

// checkRedisConfig warns loudly about the settings docs/operations.md
// requires: under a maxmemory-policy other than noeviction Redis may drop
// records (terminal ones first, they have TTLs); without the append-only file a
// restart loses every acknowledged write since the last snapshot.
func checkRedisConfig(ctx context.Context, st *store.Store, log *slog.Logger) {
	c, err := st.ServerConfig(ctx, "maxmemory-policy", "appendonly")
	if err != nil {
		log.Warn("could not read Redis's configuration; make sure maxmemory-policy is noeviction and appendonly is yes", "err", err)
		return
	}
	if policy := c["maxmemory-policy"]; policy != "noeviction" {
		log.Warn("REDIS maxmemory-policy IS NOT noeviction: Redis may silently evict request records under memory pressure. Set maxmemory-policy noeviction.",
			"maxmemory_policy", policy)
	}
	if aof := c["appendonly"]; aof != "yes" {
		log.Warn("REDIS appendonly IS NOT yes: a Redis restart loses every acknowledged write since its last snapshot. Set appendonly yes (docs/operations.md, Redis configuration).",
			"appendonly", aof)
	}
}
