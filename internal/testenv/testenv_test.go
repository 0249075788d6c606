package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func client(t *testing.T, addr string, timeout time.Duration) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: addr, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		MaxRetries: -1, DisableIdentity: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// Must come first: many tests racing for the first use start one server.
func TestRedisConcurrentFirstUse(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			a := testenv.Redis(t)
			mu.Lock()
			seen[a] = true
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		if len(seen) != 1 {
			t.Errorf("Redis returned %d different addresses: %v", len(seen), seen)
		}
	})
}

func TestRedis(t *testing.T) {
	ctx := ctxT(t)
	addr := testenv.Redis(t)
	if os.Getenv(testenv.EnvRedisAddr) == "" {
		if _, port, _ := net.SplitHostPort(addr); port == "6379" {
			t.Fatalf("Redis started on the default port: %s", addr)
		}
	}
	if again := testenv.Redis(t); again != addr {
		t.Fatalf("second Redis() = %s, first %s", again, addr)
	}
	c := client(t, addr, 5*time.Second)
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "redis_mode:standalone") {
		t.Fatalf("not a standalone Redis:\n%s", info)
	}

	p := testenv.Isolate(t)
	if err := c.Set(ctx, p+":k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, p+":k").Result(); err != nil || v != "v" {
		t.Fatalf("GET = %q, %v", v, err)
	}
}

// FlushRedis is tried on a private server: with ASYNCSTATUS_TEST_REDIS_ADDR
// set, Redis() is shared with the other packages' tests running in parallel.
func TestFlushRedis(t *testing.T) {
	ctx := ctxT(t)
	p := testenv.StartRedisProcess(t)
	c := client(t, p.Addr(), 5*time.Second)
	for _, k := range []string{"a", "b", "c"} {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	testenv.FlushRedis(t, p.Addr())
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after FlushRedis = %d, %v", n, err)
	}
}

func TestIsolate(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		p := testenv.Isolate(t)
		if !strings.HasPrefix(p, "t") || len(p) != 17 || strings.ContainsAny(p, "{}") {
			t.Fatalf("bad prefix %q", p)
		}
		if seen[p] {
			t.Fatalf("prefix %q returned twice", p)
		}
		seen[p] = true
	}
}

func TestMiniredis(t *testing.T) {
	m := testenv.Miniredis(t)
	c := client(t, m.Addr(), time.Second)
	if err := c.Set(context.Background(), "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	m.FastForward(2 * time.Minute)
	if m.Exists("k") {
		t.Fatal("key did not expire after FastForward")
	}
}

func TestFreePort(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		p := testenv.FreePort(t)
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("FreePort %d is not free: %v", p, err)
		}
		l.Close()
	}
}

func TestCluster(t *testing.T) {
	ctx := ctxT(t)
	addrs := testenv.Cluster(t)
	if len(addrs) == 0 {
		t.Fatal("no addresses")
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DisableIdentity: true})
	t.Cleanup(func() { cc.Close() })

	// 3 masters, each with a replica, covering every slot.
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	masters, covered := map[string]bool{}, 0
	for _, s := range slots {
		if len(s.Nodes) < 2 {
			t.Errorf("slots %d-%d have no replica", s.Start, s.End)
		}
		masters[s.Nodes[0].Addr] = true
		covered += s.End - s.Start + 1
	}
	if os.Getenv(testenv.EnvClusterAddrs) == "" && len(masters) != 3 {
		t.Errorf("%d masters, want 3", len(masters))
	}
	if covered != 16384 {
		t.Errorf("%d slots covered", covered)
	}

	// Keys with different hash tags land on different masters.
	p := testenv.Isolate(t)
	keyOn := map[string]string{} // master addr -> a key it owns
	for i := 0; len(keyOn) < len(masters) && i < 1000; i++ {
		key := fmt.Sprintf("{%s-%d}:k", p, i)
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := keyOn[m.Options().Addr]; !ok {
			keyOn[m.Options().Addr] = key
		}
	}
	if len(keyOn) < 2 {
		t.Fatalf("keys reached only %d masters", len(keyOn))
	}
	for master, key := range keyOn {
		if err := cc.Set(ctx, key, master, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		direct := client(t, master, 5*time.Second)
		if v, err := direct.Get(ctx, key).Result(); err != nil || v != master {
			t.Errorf("GET %s on its master %s = %q, %v", key, master, v, err)
		}
		if n, err := direct.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n < 1 {
			t.Errorf("WAIT 1 on %s = %d, %v: replica not attached", master, n, err)
		}
		for other := range keyOn {
			if other == master {
				continue
			}
			err := client(t, other, 5*time.Second).Get(ctx, key).Err()
			if err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
				t.Errorf("GET %s on %s (not its master): %v, want MOVED", key, other, err)
			}
		}
	}

	// A multi-key command across hash tags is refused; within one tag it works.
	var two []string
	for _, k := range keyOn {
		two = append(two, k)
	}
	err = cc.MSet(ctx, two[0], "a", two[1], "b").Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Errorf("MSET across hash tags: %v, want CROSSSLOT", err)
	}
	tag := fmt.Sprintf("{%s-same}", p)
	if err := cc.MSet(ctx, tag+"a", "1", tag+"b", "2").Err(); err != nil {
		t.Errorf("MSET within one hash tag: %v", err)
	}

	if os.Getenv(testenv.EnvClusterAddrs) != "" {
		// Shared with the other packages' tests running in parallel.
		t.Log("not flushing the shared cluster from " + testenv.EnvClusterAddrs)
		return
	}
	testenv.FlushCluster(t, addrs)
	err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if err == nil && n != 0 {
			err = fmt.Errorf("%s has %d keys after FlushCluster", m.Options().Addr, n)
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
}

func TestProcessPauseResumeRestart(t *testing.T) {
	ctx := ctxT(t)
	p := testenv.StartRedisProcess(t, "--appendonly", "yes", "--appendfsync", "always")
	if p.Addr() == testenv.StartRedisProcess(t).Addr() {
		t.Fatal("two processes share an address")
	}
	c := client(t, p.Addr(), 300*time.Millisecond)
	runID := func() string {
		t.Helper()
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok {
				return v
			}
		}
		t.Fatal("no run_id")
		return ""
	}
	get := func() string {
		t.Helper()
		v, err := c.Get(ctx, "k").Result()
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		return v
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	first := runID()

	p.Pause()
	err := c.Get(ctx, "k").Err()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("GET on a paused server: %v, want a timeout", err)
	}
	p.Resume()
	if v := get(); v != "v" {
		t.Fatalf("after Resume GET = %q", v)
	}

	p.Restart()
	if v := get(); v != "v" {
		t.Fatalf("after Restart GET = %q (AOF not reloaded)", v)
	}
	if runID() == first {
		t.Fatal("Restart did not start a new process")
	}
	if _, err := os.Stat(filepath.Join(p.Dir(), "appendonlydir")); err != nil {
		t.Fatalf("no AOF in Dir: %v", err)
	}

	p.Stop()
	p.Stop() // idempotent
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded after Stop")
	}
	p.Restart()
	if v := get(); v != "v" {
		t.Fatalf("after Stop+Restart GET = %q", v)
	}
	p.Pause()
	p.Restart() // kills the paused process
	if v := get(); v != "v" {
		t.Fatalf("after Pause+Restart GET = %q", v)
	}
}
