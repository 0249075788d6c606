package main

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
)

// limiterConfig is the rate limits of cfg for internal/ratelimit.
func limiterConfig(cfg config.Config) ratelimit.Config {
	return ratelimit.Config{Enabled: cfg.RateLimit.Enabled, Read: cfg.RateLimit.Read, Write: cfg.RateLimit.Write,
		Admin: cfg.RateLimit.Admin, Tenant: cfg.RateLimit.Tenant, Timeout: cfg.RateLimit.Timeout, Prefix: cfg.Redis.KeyPrefix}
}

// rateLimits is what the store's scripts count (store.Options.RateLimits):
// nil when rate limits are off.
func rateLimits(cfg config.Config) (*ratelimit.Rates, error) {
	if !cfg.RateLimit.Enabled {
		return nil, nil
	}
	r, err := ratelimit.ParseRates(limiterConfig(cfg))
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// newRateLimiter is the HTTP layer's limiter, for the calls refused before
// their script counted them (a bad body, query or id: every other call is
// counted by the store), its fail-opens and errors on m. It returns nil when rate limits are off, so the HTTP layer
// makes no call.
func newRateLimiter(ctx context.Context, cfg config.Config, rdb redis.UniversalClient, log *slog.Logger, m *metrics.Metrics) (httpapi.RateLimiter, error) {
	if !cfg.RateLimit.Enabled {
		return nil, nil
	}
	l, err := ratelimit.New(ctx, limiterConfig(cfg), rdb, log)
	if err != nil {
		return nil, err
	}
	m.WatchRateLimiter(func() metrics.RateLimitStats {
		return metrics.RateLimitStats{FailedOpen: l.FailOpenCount(), Errors: l.ErrorCount()}
	})
	return l, nil
}
