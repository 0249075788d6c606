package testenv

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RoundTrips is a go-redis hook (client.AddHook) that counts round trips, a
// command sent alone or a pipeline (an autopipelined batch included), and the
// commands they carried. Safe for concurrent use.
type RoundTrips struct{ Trips, Cmds atomic.Int64 }

// DialHook passes dials through uncounted.
func (c *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a command sent alone: one round trip, one command.
func (c *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.Trips.Add(1)
		c.Cmds.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline: one round trip, its commands.
func (c *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.Trips.Add(1)
		c.Cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
