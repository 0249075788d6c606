package testenv

import (
	"context"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Backend is one kind of Redis a suite runs against unchanged: miniredis does not
// catch cross-slot mistakes or every Lua difference, so suites run on all three.
type Backend struct {
	Name string
	// Client connects to this backend; the client is closed when the test ends.
	Client func(tb testing.TB) redis.UniversalClient
	// AutoPipeline is what serve sets store.Options.AutoPipeline to on such a
	// backend: true, except over in-memory pipes (the embedded store's way).
	AutoPipeline bool
}

// Backends are miniredis (through in-memory pipes, as the embedded store runs),
// the shared real redis-server, and the shared local Redis Cluster.
func Backends() []Backend {
	closing := func(tb testing.TB, c redis.UniversalClient) redis.UniversalClient {
		tb.Cleanup(func() { _ = c.Close() })
		return c
	}
	return []Backend{
		{"miniredis", func(tb testing.TB) redis.UniversalClient {
			m := Miniredis(tb)
			return closing(tb, redis.NewClient(&redis.Options{
				Dialer:          func(context.Context, string, string) (net.Conn, error) { return m.Dial() },
				DisableIdentity: true,
			}))
		}, false},
		{"redis", func(tb testing.TB) redis.UniversalClient {
			return closing(tb, redis.NewClient(&redis.Options{Addr: Redis(tb)}))
		}, true},
		{"cluster", func(tb testing.TB) redis.UniversalClient {
			return closing(tb, redis.NewClusterClient(&redis.ClusterOptions{Addrs: Cluster(tb)}))
		}, true},
	}
}
