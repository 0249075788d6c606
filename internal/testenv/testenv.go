// Package testenv gives tests real Redis servers that the tests own.
//
// It is test support code: import it only from _test.go files.
//
// A package whose tests use [Redis] or [Cluster] must run them through [Main]:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
//
// [Redis] and [Cluster] start one standalone redis-server and one 6-node Redis
// Cluster (3 masters, 3 replicas) per test binary, lazily on first use, and
// [Main] stops them when the tests are done. When the environment variables
// ASYNCSTATUS_TEST_REDIS_ADDR or ASYNCSTATUS_TEST_CLUSTER_ADDRS are set (as
// .ci/run does), the servers named there are used instead. They must be
// dedicated to tests, and they are shared by all packages of `go test ./...`
// running in parallel: namespace keys with [Isolate] rather than flushing
// them (see [FlushRedis]).
//
// [StartRedisProcess] gives a test its own redis-server to pause, kill and
// restart; [Miniredis] an in-process fake.
//
// A server that cannot be found, started or reached fails the test; testenv
// never skips.
//
// Servers are never started on, and never default to, 127.0.0.1:6379.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// Environment variables that point the tests at servers started elsewhere.
const (
	// EnvRedisAddr is "host:port" of a standalone Redis used by [Redis].
	EnvRedisAddr = "ASYNCSTATUS_TEST_REDIS_ADDR"
	// EnvClusterAddrs is a comma-separated list of seed "host:port"s of a
	// Redis Cluster used by [Cluster].
	EnvClusterAddrs = "ASYNCSTATUS_TEST_CLUSTER_ADDRS"
)

// shared holds the servers shared by all tests of this test binary.
var shared sharedEnv

type sharedEnv struct {
	inMain atomic.Bool

	redisOnce sync.Once
	redisAddr string
	redisErr  error

	clusterOnce  sync.Once
	clusterAddrs []string
	clusterErr   error

	builds [2]serviceBuild // ServiceBinary: [0] plain, [1] with -race

	mu      sync.Mutex
	servers []*server
	dirs    []string
}

func (e *sharedEnv) own(s *server) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.servers = append(e.servers, s)
}

func (e *sharedEnv) ownDir(dir string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dirs = append(e.dirs, dir)
}

func (e *sharedEnv) stopAll() {
	e.mu.Lock()
	servers, dirs := e.servers, e.dirs
	e.servers, e.dirs = nil, nil
	e.mu.Unlock()
	for _, s := range servers {
		s.kill()
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: removing %s: %v\n", d, err)
		}
	}
}

// tempDir makes a directory for shared servers, named after this process so
// that the directories of test binaries that died without running Main's
// cleanup (timeout panic, crash) can be removed by a later run.
func tempDir(kind string) (string, error) {
	sweepOnce.Do(sweepStale)
	return os.MkdirTemp("", fmt.Sprintf("%s%d-%s-", tempPrefix, os.Getpid(), kind))
}

const tempPrefix = "asyncstatus-testenv-"

var sweepOnce sync.Once

// sweepStale removes the temp dirs of test binaries that no longer run.
func sweepStale() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, m := range matches {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(m), tempPrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(m)
		}
	}
}

// Main runs the tests and then stops every server that [Redis] and [Cluster]
// started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
func Main(m *testing.M) int {
	shared.inMain.Store(true)
	defer shared.stopAll()
	return m.Run()
}

func requireMain(tb testing.TB, fn string) {
	tb.Helper()
	if !shared.inMain.Load() {
		tb.Fatalf("testenv.%s: this package's tests must run through testenv.Main, so that the servers are stopped afterwards; add\n\n"+
			"\tfunc TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }\n\nto one of its _test.go files", fn)
	}
}
