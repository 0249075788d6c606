package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
)

// startMetrics serves /metrics on metrics.addr, a listener of its own, until
// the returned stop; "" starts nothing (/metrics is then on http.addr). It
// needs no credential, as on http.addr: the address is what keeps it private.
func startMetrics(ctx context.Context, cfg config.Config, m *metrics.Metrics, log *slog.Logger) (stop func(), err error) {
	if cfg.Metrics.Addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.Metrics.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (metrics.addr): %w", cfg.Metrics.Addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	log.Info("metrics listening", "addr", ln.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "err", err)
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		<-done
	}, nil
}
