package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Redis returns "host:port" of a real standalone Redis for this test binary.
//
// With ASYNCSTATUS_TEST_REDIS_ADDR set, that server is used (after checking
// that it answers PING). Otherwise one redis-server is started on a free
// loopback port, without persistence, the first time Redis is called; all
// tests of the binary share it and [Main] stops it. Namespace keys with
// [Isolate]: the server may be shared with other tests and, in CI, with other
// packages (see [FlushRedis]).
//
// Redis fails the test if no server can be had; it never skips.
func Redis(tb testing.TB) string {
	tb.Helper()
	requireMain(tb, "Redis")
	shared.redisOnce.Do(func() {
		shared.redisAddr, shared.redisErr = sharedRedis()
	})
	if shared.redisErr != nil {
		tb.Fatalf("testenv.Redis: no Redis server for the tests: %v", shared.redisErr)
	}
	return shared.redisAddr
}

func sharedRedis() (string, error) {
	if addr := strings.TrimSpace(os.Getenv(EnvRedisAddr)); addr != "" {
		if err := waitPing(addr, nil, 5*time.Second); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvRedisAddr, addr, err)
		}
		return addr, nil
	}
	bin, err := findBinary("redis-server")
	if err != nil {
		return "", err
	}
	dir, err := tempDir("redis")
	if err != nil {
		return "", err
	}
	shared.ownDir(dir)
	s, err := startServer(bin, dir, false, nil)
	if err != nil {
		return "", err
	}
	shared.own(s)
	return s.addr(), nil
}

// FlushRedis erases every key of the standalone Redis at addr (FLUSHALL).
//
// Flush only a server that no other test binary uses at the same time. The
// servers of [Redis] and [Cluster] are private to the test binary when
// testenv starts them, but with ASYNCSTATUS_TEST_REDIS_ADDR /
// ASYNCSTATUS_TEST_CLUSTER_ADDRS set (as in CI) all packages of
// `go test ./...` share them and run in parallel, so a flush there erases
// keys that other packages' tests are using. Tests on the shared servers
// should namespace their keys with [Isolate] instead of flushing; a
// [StartRedisProcess] server can always be flushed.
func FlushRedis(tb testing.TB, addr string) {
	tb.Helper()
	c := newClient(addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.FlushAll(ctx).Err(); err != nil {
		tb.Fatalf("testenv.FlushRedis(%s): %v", addr, err)
	}
}

// Isolate returns a key prefix unique to this call ("t" and 16 random hex
// digits), so that tests sharing a server never see each other's keys and
// need no flush (see [FlushRedis] for why flushing a shared server is
// unsafe). Append your own separator. The prefix contains no hash tag,
// so on a cluster the keys still spread over the slots. It is logged when the
// test fails.
func Isolate(tb testing.TB) string {
	tb.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	p := "t" + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("testenv.Isolate: keys of %s were prefixed %q", tb.Name(), p)
		}
	})
	return p
}

// Miniredis starts an in-process miniredis for this test (miniredis.RunT);
// it is closed when the test ends. Remember that miniredis does not expire
// keys by itself (use FastForward) and does not check cluster rules.
func Miniredis(tb testing.TB) *miniredis.Miniredis {
	tb.Helper()
	return miniredis.RunT(tb)
}

// newClient returns a quiet client for testenv's own checks.
func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                     addr,
		DialTimeout:              2 * time.Second,
		ReadTimeout:              5 * time.Second,
		WriteTimeout:             5 * time.Second,
		MaxRetries:               -1,
		PoolSize:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}
