package testenv

import (
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

// SentinelBackend is a [Backend] over a Sentinel-managed master that the test
// owns (a master, one replica, three sentinels watching them as "main"), as
// serve connects with redis.sentinel_master. Every Client call of it returns
// the same client, so that several stores share the one master.
func SentinelBackend(tb testing.TB) Backend {
	tb.Helper()
	master := StartRedisProcess(tb, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(master.Addr())
	StartRedisProcess(tb, "--replicaof", host, port, "--repl-diskless-sync-delay", "0")
	sentinels := StartSentinels(tb, "main", master.Addr(), 3)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "main", SentinelAddrs: sentinels.Addrs()})
	tb.Cleanup(func() { _ = rdb.Close() })
	return Backend{Name: "sentinel", Client: func(testing.TB) redis.UniversalClient { return rdb }, AutoPipeline: true}
}
