package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/console"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
)

// startConsole serves the operator console (docs/reference.md §14) on console.addr until ctx
// ends; the returned stop waits for it. With the embedded store it prints the
// console's URL and a one-time sign-in link for the demo key (demoKeyID) on
// stdout, beside the demo key itself. console.addr "" or "off" starts nothing.
func startConsole(ctx context.Context, cfg config.Config, st *store.Store, hub *store.Hub, authn *auth.Authenticator,
	m *metrics.Metrics, log *slog.Logger, demoKeyID string, stdout io.Writer) (stop func(), err error) {
	if !cfg.Console.Enabled() {
		return func() {}, nil
	}
	masked, err := cfg.Masked().YAML()
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	// The hub wakes the live views at each change, made on whichever replica:
	// serve's own (hub, stopped by serve after the console), or, when waiting
	// is off (wait.max_waiters 0), one of the console's.
	own := hub == nil
	if own {
		hub = st.NewHub(store.HubOptions{Log: log})
	}
	closeHub := func() {
		if own {
			hub.Close()
		}
	}
	c, err := console.New(st, authn, console.Options{SessionTTL: cfg.Console.SessionTTL, Config: masked,
		Gatherer: m.Registry(), Log: log, Watcher: hub})
	if err != nil {
		closeHub()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Console.Addr)
	if err != nil {
		closeHub()
		return nil, fmt.Errorf("console: listen on %s (console.addr): %w", cfg.Console.Addr, err)
	}
	// Streams (live views) end with ctx; no write timeout, since they are long.
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	base := consoleURL(ln.Addr())
	log.Info("console listening", "addr", ln.Addr().String(), "url", base)
	if demoKeyID != "" {
		link, err := c.SignInLink(ctx, base, demoKeyID)
		if err != nil {
			_ = ln.Close()
			closeHub()
			return nil, fmt.Errorf("console: sign-in link: %w", err)
		}
		fmt.Fprintf(stdout, "  Operator console: %s/\n  One-click sign-in for the demo key (works once, within 15 minutes):\n\n%s\n\n", base, link)
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() { defer func() { done <- struct{}{} }(); c.Run(sampleCtx) }()
	go func() {
		defer func() { done <- struct{}{} }()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("console stopped", "err", err)
		}
	}()
	return func() {
		stopSampling()
		sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		<-done
		<-done
		closeHub()
	}, nil
}

// consoleURL is the URL a browser on this machine reaches the listener at.
func consoleURL(a net.Addr) string {
	host, port, _ := net.SplitHostPort(a.String())
	if ip := net.ParseIP(host); host == "" || ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
