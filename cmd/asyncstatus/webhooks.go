package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/asyncstatus/asyncstatus/internal/config"
	httpapi "github.com/asyncstatus/asyncstatus/internal/http"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// minWebhookSecretKey is the shortest accepted webhooks.secret_key: 256 bits.
const minWebhookSecretKey = 32

// webhookSealer is the encryption of endpoint secrets at rest: under
// webhooks.secret_key, which every replica must share and which must survive
// restarts, so it is required with a real Redis; the embedded store, which
// lives and dies with one process, uses a random key. nil when webhooks are off.
func webhookSealer(cfg config.Config) (*webhook.Sealer, error) {
	w := cfg.Webhooks
	switch {
	case !w.Enabled:
		return nil, nil
	case w.SecretKey != "":
		if len(w.SecretKey) < minWebhookSecretKey {
			return nil, fmt.Errorf("webhooks.secret_key: must be at least %d bytes (set %s)", minWebhookSecretKey, config.EnvName("webhooks.secret_key"))
		}
		return webhook.NewSealer([]byte(w.SecretKey))
	case !cfg.Embedded():
		return nil, fmt.Errorf("webhooks.secret_key: required when Redis is configured and webhooks.enabled is true "+
			"(set %s to at least %d random bytes, or set webhooks.enabled to false)", config.EnvName("webhooks.secret_key"), minWebhookSecretKey)
	}
	return webhook.RandomSealer()
}

// startWebhooks starts this replica's webhook dispatcher (every replica runs
// one) and returns the registration service for the HTTP routes and a function
// that stops the dispatcher and waits for the attempts in flight. With webhooks
// off it returns a nil service.
func startWebhooks(ctx context.Context, cfg config.Config, st *store.Store, sealer *webhook.Sealer, log *slog.Logger, m *metrics.Metrics) (httpapi.Webhooks, func(), error) {
	if !cfg.Webhooks.Enabled || sealer == nil {
		return nil, func() {}, nil
	}
	w := cfg.Webhooks
	if w.AllowHTTP || w.AllowPrivate {
		log.Warn("webhooks may reach http:// or internal addresses (webhooks.allow_http / webhooks.allow_private): for development and tests only",
			"allow_http", w.AllowHTTP, "allow_private", w.AllowPrivate)
	}
	guard := &webhook.Guard{AllowHTTP: w.AllowHTTP, AllowPrivate: w.AllowPrivate}
	d, err := webhook.NewDispatcher(st, webhook.DispatcherOptions{Timeout: w.Timeout, RetrySchedule: w.RetrySchedule,
		Guard: guard, Sealer: sealer, Log: log})
	if err != nil {
		return nil, nil, err
	}
	svc := webhook.NewService(st, guard, sealer, nil)
	svc.Registered = d.Watch
	m.WatchWebhooks(func() metrics.WebhookStats { return webhookStats(d.Stats()) })
	st.OnOutbox(d.Nudge)
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.Run(dctx) }()
	return svc, func() { cancel(); <-done; st.OnOutbox(nil); m.WatchWebhooks(nil) }, nil
}
