package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/throttle"
)

// RedisLogger takes go-redis's own log lines (a dial that failed, a pool in
// trouble, a subscription moving) into the service's structured log: go-redis
// otherwise prints them as plain text on the process's stderr, in the middle
// of the JSON lines, exactly when Redis is away and the log is read most.
// During an outage it writes one a second at most, and says how many it held
// back. Install it with redis.SetLogger, once, where the service is wired:
// go-redis keeps one logger per process.
type RedisLogger struct {
	log *slog.Logger
	th  throttle.Throttle
}

// NewRedisLogger returns a RedisLogger writing to log.
func NewRedisLogger(log *slog.Logger) *RedisLogger {
	return &RedisLogger{log: log, th: throttle.Throttle{Every: time.Second}}
}

// Printf is go-redis's logging interface (internal.Logging).
func (l *RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	ok, held := l.th.Allow(time.Now())
	if !ok {
		return
	}
	attrs := []any{"component", "go-redis"}
	if held > 0 {
		attrs = append(attrs, "suppressed", held)
	}
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...), attrs...)
}
