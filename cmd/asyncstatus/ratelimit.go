package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	"github.com/redis/go-redis/v9"
)

// rateLimiter adapts ratelimit.Limiter to the HTTP layer's RateLimiter.
type rateLimiter struct{ l *ratelimit.Limiter }

func (r rateLimiter) Allow(ctx context.Context, tenant, keyID, scope string) httpapi.RateDecision {
	d := r.l.Allow(ctx, tenant, keyID, scope)
	return httpapi.RateDecision{Allowed: d.Allowed, Headers: d.Headers(), RetryAfter: int((d.RetryAfter + time.Second - 1) / time.Second)}
}

// newRateLimiter returns nil when rate limits are off, so the HTTP layer makes no call.
func newRateLimiter(ctx context.Context, cfg config.Config, rdb redis.UniversalClient, log *slog.Logger) (httpapi.RateLimiter, error) {
	if !cfg.RateLimit.Enabled {
		return nil, nil
	}
	l, err := ratelimit.New(ctx, ratelimit.Config{Enabled: true, Read: cfg.RateLimit.Read, Write: cfg.RateLimit.Write,
		Admin: cfg.RateLimit.Admin, Tenant: cfg.RateLimit.Tenant, Timeout: cfg.RateLimit.Timeout, Prefix: cfg.Redis.KeyPrefix}, rdb, log)
	if err != nil {
		return nil, err
	}
	return rateLimiter{l}, nil
}
