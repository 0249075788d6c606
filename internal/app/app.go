// Package app composes the service: the HTTP API and its listener, the
// notification hub, the sweeper, the webhook dispatcher, the audit drainer,
// the operator console and the metrics listener, over one store. It owns how
// they are wired to each other and the order in which they start and stop, so
// that serve (cmd/asyncstatus) and every test that runs the service build it
// the same way. Reading the configuration is not its business:
// cmd/asyncstatus turns the configuration into Options.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/audit"
	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/console"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// Options are the parts of the service. A nil pointer leaves its part out.
type Options struct {
	// Store and Auth are required.
	Store *store.Store
	Auth  *auth.Authenticator
	// Limiter counts the calls refused before a script counted them; nil: rate
	// limits are off.
	Limiter httpapi.RateLimiter
	// HTTP are the API's options; Waits, Webhooks and AuditStatus are set here
	// from the parts below.
	HTTP httpapi.Options
	// Log receives every part's lines. default: slog.Default().
	Log *slog.Logger
	// Metrics, when set, is told the counters of the sweeper, the dispatcher
	// and the drainer.
	Metrics *metrics.Metrics
	// Listener is where the API is served; nil: it is not served (a test calls
	// API().App().Test).
	Listener net.Listener
	// MetricsListener serves /metrics alone (metrics.addr); needs Metrics.
	MetricsListener net.Listener
	// ShutdownTimeout bounds how long Close waits for each listener's requests
	// in flight. default: 5s.
	ShutdownTimeout time.Duration
	// Waits is the notification hub the API's waits (docs/reference.md §12)
	// and the console's live views use; nil: waiting is off.
	Waits *store.HubOptions
	// WaitsVia, when set, stands between the API and the hub (a test loses
	// notifications through it).
	WaitsVia func(httpapi.Waits) httpapi.Waits
	// Sweep runs a sweeper (timeouts, retention cleanup).
	Sweep *sweep.Options
	// Webhooks runs a webhook dispatcher and serves the registration routes
	// (docs/reference.md §10); Guard and Sealer are required.
	Webhooks *webhook.DispatcherOptions
	// Audit runs an audit drainer; its Sink is closed by Close.
	Audit *audit.Options
	// Console serves the operator console (docs/reference.md §14).
	Console *ConsoleOptions
}

// ConsoleOptions are the operator console's.
type ConsoleOptions struct {
	console.Options
	// Listener is where the console is served; required.
	Listener net.Listener
	// Live wakes the live views with a hub: the API's (Options.Waits) or,
	// when waiting is off, one of the console's own. false: the views re-read
	// every LiveInterval. It overrides Options.Watcher.
	Live bool
}

// App is the service, built by New, started by Start or Run, stopped by Close.
type App struct {
	o       Options
	log     *slog.Logger
	api     *httpapi.Server
	hub     *store.Hub // nil when waiting is off
	ownHub  *store.Hub // the console's own, when waiting is off
	sweeper *sweep.Sweeper
	hooks   *webhook.Dispatcher
	drainer *audit.Drainer
	console *console.Server

	started   bool
	cancel    context.CancelFunc // ends the parts that stop with the run's context
	stopAudit context.CancelFunc // the drainer outlives the run's context
	served    chan error         // the API listener's end
	apiDone   chan struct{}      // closed when the API listener's goroutine returns
	done      sync.WaitGroup     // the background parts (not the API listener)
	auditDone chan struct{}
	servers   []*http.Server // console, metrics
	closeOnce sync.Once
	closeErr  error
}

// New builds every part and wires them to each other; nothing runs yet.
func New(o Options) (*App, error) {
	if o.Store == nil || o.Auth == nil {
		return nil, errors.New("app: Store and Auth are required")
	}
	if o.MetricsListener != nil && o.Metrics == nil {
		return nil, errors.New("app: MetricsListener needs Metrics")
	}
	if o.Console != nil && o.Console.Listener == nil {
		return nil, errors.New("app: Console needs its Listener")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 5 * time.Second
	}
	a := &App{o: o, log: o.Log}
	st := o.Store
	if o.Waits != nil {
		a.hub = st.NewHub(*o.Waits)
		o.HTTP.Waits = a.hub
		if o.WaitsVia != nil {
			o.HTTP.Waits = o.WaitsVia(a.hub)
		}
	}
	if w := o.Webhooks; w != nil {
		d, err := webhook.NewDispatcher(st, *w)
		if err != nil {
			a.closeHubs()
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		svc := webhook.NewService(st, w.Guard, w.Sealer, nil)
		svc.Registered = d.Watch
		a.hooks, o.HTTP.Webhooks = d, svc
	}
	if o.Audit != nil {
		d, err := audit.NewDrainer(st, *o.Audit)
		if err != nil {
			a.closeHubs()
			return nil, fmt.Errorf("audit: %w", err)
		}
		a.drainer, o.HTTP.AuditStatus = d, d.Status
	}
	a.api = httpapi.New(st, o.Auth, o.Limiter, o.HTTP, o.Log)
	if o.Sweep != nil {
		a.sweeper = sweep.New(st, *o.Sweep)
	}
	if c := o.Console; c != nil {
		co := c.Options
		if c.Live {
			if a.hub == nil {
				a.ownHub = st.NewHub(store.HubOptions{Log: o.Log})
				co.Watcher = a.ownHub
			} else {
				co.Watcher = a.hub
			}
		}
		srv, err := console.New(st, o.Auth, co)
		if err != nil {
			a.closeHubs()
			return nil, fmt.Errorf("console: %w", err)
		}
		a.console = srv
	}
	a.o = o
	return a, nil
}

// API is the HTTP API.
func (a *App) API() *httpapi.Server { return a.api }

// Console is the operator console; nil without Options.Console.
func (a *App) Console() *console.Server { return a.console }

// Hub is the notification hub; nil when waiting is off.
func (a *App) Hub() *store.Hub { return a.hub }

// Start starts every part: the listeners are served, and the sweeper, the
// dispatcher, the drainer and the console's sampling run, until Close. The
// sweeper, the dispatcher and the console's streams also end with ctx; the
// drainer goes on until Close, so that the entries of the requests still in
// flight are written too.
func (a *App) Start(ctx context.Context) {
	a.started = true
	ctx, a.cancel = context.WithCancel(ctx)
	o, st, m := a.o, a.o.Store, a.o.Metrics
	if a.hooks != nil {
		if m != nil {
			m.WatchWebhooks(func() metrics.WebhookStats { return webhookStats(a.hooks.Stats()) })
		}
		st.OnOutbox(a.hooks.Nudge)
		a.goRun(func() { a.hooks.Run(ctx) })
	}
	if a.drainer != nil {
		st.OnAudit(a.drainer.Nudge)
		if m != nil {
			m.WatchAudit(func() metrics.AuditStats { return auditStats(a.drainer.Stats()) })
		}
		var actx context.Context
		actx, a.stopAudit = context.WithCancel(context.WithoutCancel(ctx))
		a.auditDone = make(chan struct{})
		go func() { defer close(a.auditDone); a.drainer.Run(actx) }()
	}
	if a.sweeper != nil {
		a.goRun(func() { a.sweeper.Run(ctx) })
		if m != nil {
			m.WatchSweeper(func() metrics.SweepStats { return sweepStats(a.sweeper.Stats()) })
		}
	}
	if o.MetricsListener != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.Handler())
		a.serveHTTP(ctx, o.MetricsListener, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10}, "metrics listener stopped")
	}
	if a.console != nil {
		a.goRun(func() { a.console.Run(ctx) })
		// Streams (live views) end with ctx; no write timeout, since they are long.
		a.serveHTTP(ctx, o.Console.Listener, &http.Server{Handler: a.console.Handler(), ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10}, "console stopped")
	}
	if o.Listener != nil {
		a.served, a.apiDone = make(chan error, 1), make(chan struct{})
		go func() { defer close(a.apiDone); a.served <- a.api.App().Listener(o.Listener) }()
	}
}

func (a *App) goRun(f func()) {
	a.done.Add(1)
	go func() { defer a.done.Done(); f() }()
}

// serveHTTP serves srv on ln until Close; its requests' context is ctx.
func (a *App) serveHTTP(ctx context.Context, ln net.Listener, srv *http.Server, stopped string) {
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	a.servers = append(a.servers, srv)
	a.goRun(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error(stopped, "err", err)
		}
	})
}

// Run starts the service and serves until ctx ends or the API's listener
// fails; then it stops every part (Close).
func (a *App) Run(ctx context.Context) error {
	a.Start(ctx)
	select {
	case err := <-a.served:
		_ = a.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	a.log.Info("shutting down: finishing requests in flight", "timeout", a.o.ShutdownTimeout.String())
	if err := a.Close(); err != nil {
		return err
	}
	a.log.Info("stopped")
	return nil
}

// Close stops every part, in this order: the API (held long polls answer at
// once, streams end, requests in flight finish within ShutdownTimeout), the
// console, the metrics listener, the sweeper, the drainer after a last pass
// (its sink is closed), the hub and the dispatcher once its attempts in flight
// end. The store stays open: it is the caller's; the listeners are the
// App's from New on. Close is safe to call more than once, and without Start.
func (a *App) Close() error {
	a.closeOnce.Do(func() { a.closeErr = a.close() })
	return a.closeErr
}

func (a *App) close() error {
	if !a.started {
		a.api.StopWaits()
		a.closeHubs()
		a.closeSink()
		for _, ln := range []net.Listener{a.o.Listener, a.o.MetricsListener} {
			if ln != nil {
				_ = ln.Close()
			}
		}
		if a.o.Console != nil {
			_ = a.o.Console.Listener.Close()
		}
		return nil
	}
	a.cancel()
	a.api.StopWaits() // held long polls answer now, streams end
	var err error
	if a.served != nil {
		if e := a.api.App().ShutdownWithTimeout(a.o.ShutdownTimeout); e != nil && !errors.Is(e, context.DeadlineExceeded) {
			err = fmt.Errorf("shutdown: %w", e)
		}
		<-a.apiDone
	}
	for _, srv := range a.servers {
		sctx, cancel := context.WithTimeout(context.Background(), a.o.ShutdownTimeout)
		if e := srv.Shutdown(sctx); e != nil {
			_ = srv.Close()
		}
		cancel()
	}
	a.done.Wait() // the sweeper, the dispatcher, the console's sampling and the listeners
	if a.drainer != nil {
		a.stopAudit()
		<-a.auditDone
		a.o.Store.OnAudit(nil)
		if a.o.Metrics != nil {
			a.o.Metrics.WatchAudit(nil)
		}
		a.closeSink()
	}
	a.closeHubs()
	if a.hooks != nil {
		a.o.Store.OnOutbox(nil)
		if a.o.Metrics != nil {
			a.o.Metrics.WatchWebhooks(nil)
		}
	}
	return err
}

func (a *App) closeHubs() {
	if a.ownHub != nil {
		a.ownHub.Close()
	}
	if a.hub != nil {
		a.hub.Close()
	}
}

func (a *App) closeSink() {
	if a.o.Audit == nil || a.o.Audit.Sink == nil {
		return
	}
	if err := a.o.Audit.Sink.Close(); err != nil {
		a.log.Error("audit: close sink", "err", err)
	}
}

// sweepStats converts the sweeper's counters for the metrics package, which
// does not import the store.
func sweepStats(s sweep.Stats) metrics.SweepStats {
	return metrics.SweepStats{Runs: s.Runs, Errors: s.Errors, Expired: s.Expired, Failed: s.Failed, Cleaned: s.Cleaned,
		LastRun: s.LastRun, LastDuration: s.LastDuration, LastLag: s.LastLag}
}

// webhookStats converts the webhook dispatcher's counters for the metrics
// package, which does not import the webhook package.
func webhookStats(s webhook.DispatchStats) metrics.WebhookStats {
	return metrics.WebhookStats{Attempts: s.Attempts, Delivered: s.Delivered, Retrying: s.Retrying, Failed: s.Failed,
		Dropped: s.Dropped, StoreErrors: s.StoreErrors}
}

// auditStats converts the audit drainer's counters for the metrics package.
func auditStats(s audit.Stats) metrics.AuditStats {
	return metrics.AuditStats{Written: s.Written, SinkErrors: s.SinkErrors, Dropped: s.Dropped, StoreErrors: s.StoreErrors,
		Backlog: s.Backlog, BacklogMax: s.BacklogMax, Bound: s.Bound, SinkUp: s.SinkUp}
}
