package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/buildinfo"
	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/httpapi/logbuf"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
)

// cmdServe runs the service.
func cmdServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var logFormat string
	fs, cfgPath, err := flags("serve", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&logFormat, "log-format", "", "`json|text`: the log format (overrides log.format)")
	})
	if err != nil {
		return err
	}
	if err := positional("serve", fs, 0, ""); err != nil {
		return err
	}
	if logFormat != "" && logFormat != "json" && logFormat != "text" {
		return usageError{"serve: --log-format must be json or text"}
	}
	cfg, err := loadServeConfig(cfgPath, getenv)
	if err != nil {
		return err
	}
	if logFormat != "" {
		cfg.Log.Format = logFormat
	}
	procs := setMaxProcs(cfg.Runtime.MaxProcs)
	gcPercent := setGCPercent(cfg.Runtime.GCPercent, getenv)
	memLimit := setMemoryLimit(cfg.Runtime.MemoryLimitBytes, getenv, os.DirFS("/"))
	// The access log (one line per request) is buffered, so that a request does
	// not cost a write system call of its own (docs/performance.md, "Why the hot
	// path looks as it does"). A crash loses at most accessLogFlush of access
	// lines (docs/operations.md, Logs). Every other line goes out at once, after the pending access lines.
	logw := logbuf.New(stderr, accessLogFlush, accessLogBuffer)
	defer logw.Close()
	log := newLogger(cfg, logw.Direct())
	// go-redis keeps one logger per process, printing plain text on stderr
	// unless told otherwise.
	redis.SetLogger(store.NewRedisLogger(log))
	build := buildinfo.Read(version)
	m, err := newMetrics(build)
	if err != nil {
		return err
	}
	secret, sealer, err := serveSecrets(cfg)
	if err != nil {
		return err
	}
	tr, stopTracing, err := startTracing(cfg, build, log, m)
	if err != nil {
		return err
	}
	defer stopTracing()
	b, err := openObservedBackend(cfg, m, tr.store)
	if err != nil {
		return err
	}
	defer b.Close()
	m.SetEmbedded(b.embedded != nil)

	authn := newAuthenticator(cfg, b.store, secret)
	demoKey, demoKeyID := "", ""
	if b.embedded != nil {
		plain, k, err := authn.NewKey("demo", domain.ScopeRead|domain.ScopeWrite|domain.ScopeAdmin, "demo", time.Now())
		if err != nil {
			return err
		}
		if err := b.store.SaveKey(ctx, k); err != nil {
			return fmt.Errorf("save demo key: %w", err)
		}
		log.Warn("EMBEDDED STORE: no Redis is configured (redis.url, redis.cluster_addrs or redis.sentinel_master). " +
			"Data lives only in this process and is lost when it stops. Do not use this in production.")
		demoKey, demoKeyID = plain, k.ID
	} else {
		checkRedisConfig(ctx, b.store, log)
		if err := b.store.Ready(ctx); err != nil {
			log.Warn("Redis not ready at start; serving 503 until it is", "err", err)
		}
	}

	limiter, err := newRateLimiter(ctx, cfg, b.rdb, log, m)
	if err != nil {
		return fmt.Errorf("rate limits: %w", err)
	}
	opts := httpOptions(cfg)
	opts.Metrics, opts.AccessLog, opts.Build = m, newAccessLog(cfg, logw), build
	opts.MetricsElsewhere = cfg.Metrics.Addr != ""
	opts.Tracing = tr.http
	audits, err := auditOptions(cfg, logw.Direct(), log)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	ao := app.Options{Store: b.store, Auth: authn, Limiter: limiter, HTTP: opts, Log: log, Metrics: m,
		ShutdownTimeout: cfg.HTTP.ShutdownTimeout,
		// The sweeper (timeouts, retention cleanup), the webhook dispatcher
		// (docs/reference.md §10) and the audit drainer run in every replica.
		Sweep:    &sweep.Options{Interval: cfg.Lifecycle.SweepInterval, Batch: cfg.Lifecycle.SweepBatch, Log: log},
		Webhooks: webhookOptions(cfg, sealer, log, tr.webhook), Audit: audits}
	if cfg.Wait.MaxWaiters > 0 {
		// Waiting without polling (docs/reference.md §12): one notification hub per replica.
		ao.Waits = &store.HubOptions{Log: log, Observer: m}
	}
	// Every listener is bound before anything is served, so that the banner
	// names them all and a taken port stops serve at once.
	var listeners []net.Listener
	closeListeners := func() {
		for _, ln := range listeners {
			_ = ln.Close()
		}
	}
	if ao.Listener, err = listenAPI(cfg, log); err != nil {
		return err
	}
	listeners = append(listeners, ao.Listener)
	log.Info("listening", "addr", ao.Listener.Addr().String(), "version", build.Version, "revision", build.Revision, "modified", build.Modified, "max_procs", procs, "gc_percent", gcPercent, "memory_limit_bytes", memLimit)
	if ao.MetricsListener, err = listenMetrics(cfg, log); err != nil {
		closeListeners()
		return err
	}
	if ao.MetricsListener != nil {
		listeners = append(listeners, ao.MetricsListener)
	}
	if ao.Console, err = consoleOptions(cfg, m, log); err != nil {
		closeListeners()
		return err
	}
	if ao.Console != nil {
		listeners = append(listeners, ao.Console.Listener)
	}
	svc, err := app.New(ao)
	if err != nil {
		closeListeners()
		return err
	}
	if demoKey != "" {
		var banner string
		if svc.Console() != nil {
			if banner, err = consoleBanner(ctx, svc.Console(), ao.Console.Listener, demoKeyID); err != nil {
				_ = svc.Close()
				closeListeners()
				return err
			}
		}
		printEmbeddedBanner(stdout, ao.Listener.Addr(), demoKey, banner)
	}
	return svc.Run(ctx)
}

// listenAPI binds the API's listener: http.addr, on loopback for the embedded
// store when it names no host (config.APIAddr).
func listenAPI(cfg config.Config, log *slog.Logger) (net.Listener, error) {
	addr := cfg.APIAddr()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (http.addr): %w", addr, err)
	}
	if addr != cfg.HTTP.Addr {
		log.Info("embedded store: the API listens on loopback only; give http.addr a host (0.0.0.0:8080) to listen on every interface",
			"http.addr", cfg.HTTP.Addr, "addr", ln.Addr().String())
	}
	return ln, nil
}

// printEmbeddedBanner shows, once every listener is bound, what a developer
// on the embedded store needs: the API's address, the demo key and the
// console's sign-in (console, as startConsole wrote it).
func printEmbeddedBanner(stdout io.Writer, api net.Addr, key, console string) {
	fmt.Fprintf(stdout, "\n  EMBEDDED STORE - data lives only as long as this process.\n  API: %s\n  Demo API key (tenant demo, scopes read,write,admin):\n\n%s\n\n%s",
		consoleURL(api), key, console)
}

// The access log's buffer: flushed at least every accessLogFlush (what a crash
// can lose) and whenever accessLogBuffer bytes (about 300 lines) are pending.
const (
	accessLogFlush  = 100 * time.Millisecond
	accessLogBuffer = 64 << 10
)

// newAccessLog is newLogger for the access log: the same format and level,
// with the request lines of the JSON format written by httpapi.NewAccessLog
// (identical bytes, without slog's per-attribute work).
func newAccessLog(cfg config.Config, w io.Writer) *slog.Logger {
	if cfg.Log.Format == "text" {
		return newLogger(cfg, w)
	}
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Log.Level)) // as newLogger does
	return httpapi.NewAccessLog(w, &slog.HandlerOptions{Level: lvl})
}

func httpOptions(cfg config.Config) httpapi.Options {
	o := httpapi.Options{PublicURL: cfg.HTTP.PublicURL, TrustedProxies: cfg.HTTP.TrustedProxies, BodyLimitBytes: cfg.HTTP.BodyLimitBytes,
		Limits:      domain.Limits{ContextBytes: cfg.Limits.ContextBytes, ResultBytes: cfg.Limits.ResultBytes},
		ReadTimeout: cfg.HTTP.ReadTimeout, WriteTimeout: cfg.HTTP.WriteTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
		Wait: httpapi.WaitOptions{Max: cfg.Wait.Max, MaxWaiters: cfg.Wait.MaxWaiters, Heartbeat: cfg.Wait.Heartbeat,
			MaxWaitersPerTenant: cfg.Wait.MaxWaitersPerTenant, MaxWaitersPerCredential: cfg.Wait.MaxWaitersPerCredential,
			StreamMax: cfg.Wait.StreamMax, ReadTimeout: cfg.Redis.OpTimeout},
		CORSOrigins: cfg.HTTP.CORS.AllowedOrigins}
	so := storeOptions(cfg)
	o.Schedule, o.ScheduleByType = so.Schedule, so.ScheduleByType
	return o
}
