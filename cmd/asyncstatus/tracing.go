package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/asyncstatus/asyncstatus/internal/buildinfo"
	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/tracing"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// tracers is what serve hands the parts that trace (docs/reference.md §17):
// all nil when tracing is off, so that no part does any tracing work (an
// interface holding a nil *tracing.Tracer would not be nil).
type tracers struct {
	store   store.Tracer
	webhook webhook.Tracer
	http    fiber.Handler
}

// tracingShutdown bounds the last export at shutdown.
const tracingShutdown = 5 * time.Second

// startTracing starts the exporter when tracing.otlp_endpoint is set. The
// returned stop sends the spans still queued; serve defers it first, so it
// runs after the listener, the sweeper and the dispatcher have stopped.
func startTracing(cfg config.Config, build buildinfo.Info, log *slog.Logger, m *metrics.Metrics) (tracers, func(), error) {
	t := cfg.Tracing
	if t.OTLPEndpoint == "" {
		return tracers{}, func() {}, nil
	}
	headers, err := tracing.HeadersFromEnv(os.Getenv)
	if err != nil {
		return tracers{}, nil, err
	}
	tr, err := tracing.New(tracing.Options{Endpoint: t.OTLPEndpoint, SampleRatio: t.SampleRatio,
		ServiceName: t.ServiceName, ServiceVersion: build.Version, Log: log, Headers: headers})
	if err != nil {
		return tracers{}, nil, err
	}
	m.WatchTracing(func() int64 { return tr.Stats().Dropped }, func() int64 { return tr.Stats().Exported })
	log.Info("tracing on", "sample_ratio", t.SampleRatio, "service_name", t.ServiceName)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			log.Warn("tracing: last export incomplete", "err", err)
		}
	}
	return tracers{store: tr, webhook: tr, http: tr.Middleware()}, stop, nil
}
