package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/store"
)

// flags parses a subcommand's flags; --config is common to all.
func flags(name string, args []string, stderr io.Writer, define func(fs *flag.FlagSet)) (*flag.FlagSet, string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration file (YAML)")
	if define != nil {
		define(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, "", usageError{err.Error()}
	}
	return fs, *cfgPath, nil
}

func loadConfig(path string, getenv func(string) string) (config.Config, error) {
	if path == "" {
		path = getenv("ASYNCSTATUS_CONFIG")
	}
	cfg, err := config.Load(path, getenv)
	if err != nil {
		return config.Config{}, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

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
func openRedis(cfg config.Config) (redis.UniversalClient, *store.Embedded, error) {
	r := cfg.Redis
	to := r.OpTimeout
	switch {
	case r.URL != "":
		o, err := redis.ParseURL(r.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("redis.url: %w", err)
		}
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = to, to, to, to
		o.ContextTimeoutEnabled = true
		if r.PoolSize > 0 {
			o.PoolSize = r.PoolSize
		}
		return redis.NewClient(o), nil, nil
	case len(r.ClusterAddrs) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.ClusterAddrs, Password: r.Password,
			DialTimeout: to, ReadTimeout: to, WriteTimeout: to, PoolTimeout: to, ContextTimeoutEnabled: true,
			PoolSize: r.PoolSize}), nil, nil
	case r.SentinelMaster != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: r.SentinelMaster, SentinelAddrs: r.SentinelAddrs,
			Password: r.Password, DialTimeout: to, ReadTimeout: to, WriteTimeout: to, PoolTimeout: to,
			ContextTimeoutEnabled: true, PoolSize: r.PoolSize}), nil, nil
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
		Retention: cfg.Retention.Terminal, RetentionByType: cfg.Retention.ByType,
		IdempotencyTTL: cfg.Idempotency.TTL,
		Schedule:       secs(cfg.Polling.Schedule), ScheduleByType: map[string][]int{},
		EarlyTolerance: cfg.Polling.EarlyTolerance,
	}
	for t, ov := range cfg.Lifecycle.ByType {
		if ov.QueuedTimeout > 0 {
			o.QueuedTimeoutByType[t] = ov.QueuedTimeout
		}
		if ov.ProcessingTimeout > 0 {
			o.ProcessingTimeoutByType[t] = ov.ProcessingTimeout
		}
	}
	for t, s := range cfg.Polling.ByType {
		o.ScheduleByType[t] = secs(s)
	}
	return o
}

func openBackend(cfg config.Config) (*backend, error) {
	rdb, emb, err := openRedis(cfg)
	if err != nil {
		return nil, err
	}
	st, err := store.New(rdb, storeOptions(cfg))
	if err != nil {
		if emb != nil {
			emb.Close()
		}
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &backend{store: st, rdb: rdb, embedded: emb}, nil
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

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Log.Level))
	o := &slog.HandlerOptions{Level: lvl}
	if cfg.Log.Format == "text" {
		return slog.New(slog.NewTextHandler(w, o))
	}
	return slog.New(slog.NewJSONHandler(w, o))
}

// checkEviction warns loudly unless Redis refuses to evict: under volatile-* or
// allkeys-* policies it would drop records (terminal ones first, they have TTLs).
func checkEviction(ctx context.Context, st *store.Store, log *slog.Logger) {
	policy, err := st.MaxmemoryPolicy(ctx)
	switch {
	case err != nil:
		log.Warn("could not read maxmemory-policy; make sure it is noeviction", "err", err)
	case policy != "noeviction":
		log.Warn("REDIS maxmemory-policy IS NOT noeviction: Redis may silently evict request records under memory pressure. Set maxmemory-policy noeviction.",
			"maxmemory_policy", policy)
	}
}
