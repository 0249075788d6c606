package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	httpapi "github.com/asyncstatus/asyncstatus/internal/http"
)

func cmdServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	_, cfgPath, err := flags("serve", args, stderr, nil)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(cfgPath, getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	secret, err := pollSecret(cfg)
	if err != nil {
		return err
	}
	b, err := openBackend(cfg)
	if err != nil {
		return err
	}
	defer b.Close()

	authn := auth.New(b.store, secret, cfg.Auth.KeyCacheTTL, nil)
	if b.embedded != nil {
		plain, k, err := auth.NewKey("demo", domain.ScopeRead|domain.ScopeWrite|domain.ScopeAdmin, "demo", time.Now())
		if err != nil {
			return err
		}
		if err := b.store.SaveKey(ctx, k); err != nil {
			return fmt.Errorf("save demo key: %w", err)
		}
		log.Warn("EMBEDDED STORE: no Redis is configured (redis.url, redis.cluster_addrs or redis.sentinel_master). " +
			"Data lives only in this process and is lost when it stops. Do not use this in production.")
		fmt.Fprintf(stdout, "\n  EMBEDDED STORE - data lives only as long as this process.\n  Demo API key (tenant demo, scopes read,write,admin):\n\n%s\n\n", plain)
	} else {
		checkEviction(ctx, b.store, log)
		if err := b.store.Ready(ctx); err != nil {
			log.Warn("Redis not ready at start; serving 503 until it is", "err", err)
		}
	}

	limiter, err := newRateLimiter(ctx, cfg, b.rdb, log)
	if err != nil {
		return fmt.Errorf("rate limits: %w", err)
	}
	srv := httpapi.New(b.store, authn, limiter, httpOptions(cfg), log)
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTP.Addr, err)
	}
	log.Info("listening", "addr", ln.Addr().String(), "version", version)

	served := make(chan error, 1)
	go func() { served <- srv.App().Listener(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight", "timeout", cfg.HTTP.ShutdownTimeout)
	if err := srv.App().ShutdownWithTimeout(cfg.HTTP.ShutdownTimeout); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

func httpOptions(cfg config.Config) httpapi.Options {
	o := httpapi.Options{PublicURL: cfg.HTTP.PublicURL, BodyLimitBytes: cfg.HTTP.BodyLimitBytes,
		Limits:      domain.Limits{ContextBytes: cfg.Limits.ContextBytes, ResultBytes: cfg.Limits.ResultBytes},
		ReadTimeout: cfg.HTTP.ReadTimeout, WriteTimeout: cfg.HTTP.WriteTimeout, IdleTimeout: cfg.HTTP.IdleTimeout}
	so := storeOptions(cfg)
	o.Schedule, o.ScheduleByType = so.Schedule, so.ScheduleByType
	return o
}
