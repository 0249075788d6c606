package testenv

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/memconn"
)

// Backend is one kind of Redis a suite runs against unchanged: miniredis does not
// catch cross-slot mistakes or every Lua difference, so suites run on all three.
type Backend struct {
	Name string
	// Client connects to this backend; the client is closed when the test ends.
	Client func(tb testing.TB) redis.UniversalClient
	// AutoPipeline is what serve sets store.Options.AutoPipeline to on such a
	// backend: redis.autopipeline's default, true on every backend.
	AutoPipeline bool
}

// Backends are miniredis (through buffered in-memory pipes, as the embedded
// store runs),
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
				Dialer:          memconn.Dialer(m.Dial),
				DisableIdentity: true,
			}))
		}, true},
		{"redis", func(tb testing.TB) redis.UniversalClient {
			return closing(tb, redis.NewClient(&redis.Options{Addr: Redis(tb)}))
		}, true},
		{"cluster", func(tb testing.TB) redis.UniversalClient {
			return closing(tb, redis.NewClusterClient(&redis.ClusterOptions{Addrs: Cluster(tb)}))
		}, true},
	}
}
