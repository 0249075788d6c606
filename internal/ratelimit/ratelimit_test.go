package ratelimit

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// newClient returns a go-redis client with the library's default timeouts
// (ReadTimeout 3s, MaxRetries 3, ContextTimeoutEnabled false): Allow must
// keep its own Timeout even so.
func newClient(tb testing.TB, addr string) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                     addr,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func baseConfig(prefix string) Config {
	return Config{
		Enabled: true,
		Read:    "5-M",
		Write:   "3-M",
		Admin:   "2-M",
		Tenant:  "100-M",
		Timeout: 2 * time.Second, // generous: behaviour tests must not fail open on a busy machine
		Prefix:  prefix,
	}
}

func newLimiter(tb testing.TB, cfg Config, rdb redis.UniversalClient, log *slog.Logger) *Limiter {
	tb.Helper()
	if log == nil {
		log = slog.New(slog.NewTextHandler(testWriter{tb}, nil))
	}
	l, err := New(context.Background(), cfg, rdb, log)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return l
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

type syncBuffer = testenv.Buffer

// backend is a Redis for the behaviour tests. open returns a client, a key
// prefix, and a fastForward func for miniredis (nil for a real server).
type backend struct {
	name string
	open func(t *testing.T) (rdb redis.UniversalClient, prefix string, fastForward func(time.Duration))
}

func backends() []backend {
	return []backend{
		{"miniredis", func(t *testing.T) (redis.UniversalClient, string, func(time.Duration)) {
			m := testenv.Miniredis(t)
			return newClient(t, m.Addr()), "as", m.FastForward
		}},
		{"redis-server", func(t *testing.T) (redis.UniversalClient, string, func(time.Duration)) {
			return newClient(t, testenv.Redis(t)), testenv.Isolate(t), nil
		}},
	}
}

func allow(t *testing.T, l *Limiter, tenant, key, scope string) Decision {
	t.Helper()
	d := l.Allow(context.Background(), tenant, key, scope)
	if d.FailedOpen {
		t.Fatalf("Allow(%s,%s,%s) failed open (fail-open count %d)", tenant, key, scope, l.FailOpenCount())
	}
	return d
}

func TestBehaviour(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Run("LimitReached", func(t *testing.T) {
				rdb, prefix, _ := be.open(t)
				l := newLimiter(t, baseConfig(prefix), rdb, nil)
				for i := range 5 {
					d := allow(t, l, "t1", "k1", "read")
					if !d.Allowed || d.Limit != 5 || d.Remaining != int64(4-i) || d.RetryAfter != 0 {
						t.Fatalf("request %d: %+v", i+1, d)
					}
					if s := time.Until(d.Reset); s < 55*time.Second || s > 62*time.Second {
						t.Fatalf("request %d: reset in %s, want about 1m", i+1, s)
					}
				}
				d := allow(t, l, "t1", "k1", "read")
				if d.Allowed || d.Remaining != 0 || d.Limit != 5 || d.RetryAfter < time.Second ||
					d.RetryAfter%time.Second != 0 || d.RetryAfter > 61*time.Second {
					t.Fatalf("6th request: %+v", d)
				}
				h := d.Headers()
				if h["Retry-After"] == "" || h["Retry-After"] == "0" || h["RateLimit-Remaining"] != "0" || h["RateLimit-Limit"] != "5" {
					t.Fatalf("headers: %v", h)
				}
				// Other scopes of the same credential have their own budgets.
				if d := allow(t, l, "t1", "k1", "write"); !d.Allowed || d.Limit != 3 || d.Remaining != 2 {
					t.Fatalf("write after read exhausted: %+v", d)
				}
				if l.FailOpenCount() != 0 {
					t.Fatalf("fail-open count %d", l.FailOpenCount())
				}
			})

			t.Run("CredentialsShareTenant", func(t *testing.T) {
				rdb, prefix, _ := be.open(t)
				cfg := baseConfig(prefix)
				cfg.Read, cfg.Tenant = "2-M", "3-M"
				l := newLimiter(t, cfg, rdb, nil)
				for range 2 {
					if d := allow(t, l, "t1", "a", "read"); !d.Allowed {
						t.Fatalf("a: %+v", d)
					}
				}
				// a is out of its own budget; a refusal does not spend the tenant's.
				if d := allow(t, l, "t1", "a", "read"); d.Allowed || d.Limit != 2 {
					t.Fatalf("a 3rd: %+v", d)
				}
				// b has its own credential budget (2) but shares the tenant's (3, 2 used).
				d := allow(t, l, "t1", "b", "read")
				if !d.Allowed || d.Limit != 3 || d.Remaining != 0 {
					t.Fatalf("b 1st: want allowed, tenant binding (limit 3, remaining 0): %+v", d)
				}
				d = allow(t, l, "t1", "b", "read")
				if d.Allowed || d.Limit != 3 || d.Remaining != 0 || d.RetryAfter < time.Second {
					t.Fatalf("b 2nd: want refused by the tenant limit: %+v", d)
				}
			})

			t.Run("TenantsIndependent", func(t *testing.T) {
				rdb, prefix, _ := be.open(t)
				cfg := baseConfig(prefix)
				cfg.Tenant = "2-M"
				l := newLimiter(t, cfg, rdb, nil)
				allow(t, l, "t1", "a", "read")
				allow(t, l, "t1", "b", "read")
				if d := allow(t, l, "t1", "c", "read"); d.Allowed {
					t.Fatalf("t1 over its limit: %+v", d)
				}
				if d := allow(t, l, "t2", "a", "read"); !d.Allowed || d.Remaining != 1 {
					t.Fatalf("t2: %+v", d)
				}
			})

			t.Run("KeyNames", func(t *testing.T) {
				rdb, prefix, _ := be.open(t)
				l := newLimiter(t, baseConfig(prefix), rdb, nil)
				allow(t, l, "acme", "key_7Hq2", "admin")
				ctx := context.Background()
				for _, k := range []string{prefix + ":{acme}:rl:admin:key_7Hq2", prefix + ":{acme}:rl:tenant"} {
					if v, err := rdb.Get(ctx, k).Int(); err != nil || v != 1 {
						t.Fatalf("key %s: %d, %v", k, v, err)
					}
					if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > time.Minute {
						t.Fatalf("key %s: pttl %s, %v", k, ttl, err)
					}
				}
			})

			t.Run("Concurrent", func(t *testing.T) {
				rdb, prefix, _ := be.open(t)
				cfg := baseConfig(prefix)
				cfg.Read, cfg.Timeout = "37-M", 5*time.Second
				l := newLimiter(t, cfg, rdb, nil)
				var allowed atomic.Int64
				var wg sync.WaitGroup
				for range 20 {
					wg.Go(func() {
						for range 5 {
							d := l.Allow(context.Background(), "t1", "k", "read")
							if d.FailedOpen {
								t.Errorf("failed open")
							}
							if d.Allowed {
								allowed.Add(1)
							}
						}
					})
				}
				wg.Wait()
				if allowed.Load() != 37 {
					t.Fatalf("allowed %d of 100, want 37", allowed.Load())
				}
			})

			t.Run("WindowResets", func(t *testing.T) {
				rdb, prefix, fastForward := be.open(t)
				cfg := baseConfig(prefix)
				if fastForward == nil {
					cfg.Read = "2-S" // real time: keep the wait short
				} else {
					cfg.Read = "2-M"
				}
				l := newLimiter(t, cfg, rdb, nil)
				allow(t, l, "t1", "k", "read")
				allow(t, l, "t1", "k", "read")
				d := allow(t, l, "t1", "k", "read")
				if d.Allowed {
					t.Fatalf("3rd: %+v", d)
				}
				if fastForward != nil {
					fastForward(time.Minute)
				} else {
					time.Sleep(time.Until(d.Reset)) // Reset is never early
				}
				if d := allow(t, l, "t1", "k", "read"); !d.Allowed || d.Remaining != 1 {
					t.Fatalf("after the window: %+v", d)
				}
			})

			t.Run("ScriptFlushed", func(t *testing.T) {
				rdb, prefix, _ := be.open(t)
				l := newLimiter(t, baseConfig(prefix), rdb, nil)
				allow(t, l, "t1", "k", "read")
				if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
				if d := allow(t, l, "t1", "k", "read"); !d.Allowed || d.Remaining != 3 {
					t.Fatalf("after SCRIPT FLUSH: %+v", d)
				}
			})

			t.Run("UnknownScopeFailsOpen", func(t *testing.T) {
				rdb, prefix, _ := be.open(t)
				l := newLimiter(t, baseConfig(prefix), rdb, nil)
				d := l.Allow(context.Background(), "t1", "k", "superuser")
				if !d.Allowed || !d.FailedOpen || l.FailOpenCount() != 1 {
					t.Fatalf("%+v, count %d", d, l.FailOpenCount())
				}
			})
		})
	}
}

func TestCluster(t *testing.T) {
	addrs := testenv.Cluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                    addrs,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testenv.Isolate(t)
	cfg := baseConfig(prefix)
	cfg.Timeout = 2 * time.Second
	cfg.Read, cfg.Tenant = "2-M", "3-M"
	l := newLimiter(t, cfg, rdb, nil)
	ctx := context.Background()
	for _, tenant := range []string{"acme", "globex", "initech"} {
		allow(t, l, tenant, "a", "read")
		allow(t, l, tenant, "a", "read")
		if d := allow(t, l, tenant, "a", "read"); d.Allowed || d.Limit != 2 {
			t.Fatalf("%s a 3rd: %+v", tenant, d)
		}
		if d := allow(t, l, tenant, "b", "read"); !d.Allowed || d.Limit != 3 || d.Remaining != 0 {
			t.Fatalf("%s b: %+v", tenant, d)
		}
		ck, tk := prefix+":{"+tenant+"}:rl:read:a", prefix+":{"+tenant+"}:rl:tenant"
		s1, err1 := rdb.ClusterKeySlot(ctx, ck).Result()
		s2, err2 := rdb.ClusterKeySlot(ctx, tk).Result()
		if err1 != nil || err2 != nil || s1 != s2 {
			t.Fatalf("%s: slots %d %d (%v %v)", tenant, s1, s2, err1, err2)
		}
		if n, err := rdb.Exists(ctx, ck, tk).Result(); err != nil || n != 2 {
			t.Fatalf("%s: exists %d %v", tenant, n, err)
		}
	}
	// Scripts flushed on every master: EVALSHA falls back to EVAL.
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return c.ScriptFlush(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	if d := allow(t, l, "umbrella", "a", "write"); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("after SCRIPT FLUSH: %+v", d)
	}
}

// countHook counts what a go-redis client sends.
type countHook struct{ dials, cmds atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.dials.Add(1)
		return next(ctx, network, addr)
	}
}

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func TestDisabledSendsNothing(t *testing.T) {
	m := testenv.Miniredis(t)
	for _, enabled := range []bool{false, true} {
		rdb := newClient(t, m.Addr())
		h := &countHook{}
		rdb.AddHook(h)
		cfg := baseConfig("as")
		cfg.Enabled = enabled
		l := newLimiter(t, cfg, rdb, nil)
		for range 10 {
			d := l.Allow(context.Background(), "t1", "k", "admin")
			if !enabled && (d != Decision{Allowed: true}) {
				t.Fatalf("disabled: %+v", d)
			}
			if !enabled && len(d.Headers()) != 0 {
				t.Fatalf("disabled: headers %v", d.Headers())
			}
		}
		switch {
		case !enabled && (h.cmds.Load() != 0 || h.dials.Load() != 0):
			t.Fatalf("disabled: %d commands, %d dials", h.cmds.Load(), h.dials.Load())
		case enabled && h.cmds.Load() == 0: // the hook works
			t.Fatalf("enabled: no command seen")
		}
		t.Logf("enabled=%v: %d commands for New + 10 Allow", enabled, h.cmds.Load())
	}
	// Disabled ignores the rest of the configuration and needs no client.
	if _, err := New(context.Background(), Config{Read: "nonsense"}, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// failOpenCase checks that Allow returns (soon), fails open and counts it.
func failOpenCase(t *testing.T, l *Limiter, timeout time.Duration) {
	t.Helper()
	before := l.FailOpenCount()
	start := time.Now()
	d := l.Allow(context.Background(), "t1", "k", "read")
	took := time.Since(start)
	t.Logf("failed open after %s (timeout %s)", took, timeout)
	if !d.Allowed || !d.FailedOpen || d.Limit != 0 || len(d.Headers()) != 0 {
		t.Fatalf("want allowed, failed open, no limit info: %+v", d)
	}
	if l.FailOpenCount() != before+1 {
		t.Fatalf("fail-open count %d, want %d", l.FailOpenCount(), before+1)
	}
	// Not a timing assertion, a sanity bound: the client's own ReadTimeout
	// (3s) must not be what ends the call.
	if took > timeout+2*time.Second {
		t.Fatalf("took %s", took)
	}
}

func TestFailOpen(t *testing.T) {
	const timeout = 150 * time.Millisecond
	cfg := baseConfig("as")
	cfg.Timeout = timeout

	t.Run("ClosedMiniredis", func(t *testing.T) {
		m := testenv.Miniredis(t)
		rdb := newClient(t, m.Addr())
		l := newLimiter(t, cfg, rdb, nil)
		waitAllowed(t, l)
		m.Close()
		for range 3 {
			failOpenCase(t, l, timeout)
		}
	})

	t.Run("ClosedPort", func(t *testing.T) {
		rdb := newClient(t, fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)))
		l := newLimiter(t, cfg, rdb, nil)
		for range 3 {
			failOpenCase(t, l, timeout)
		}
	})

	t.Run("FrozenRedis", func(t *testing.T) { // SIGSTOP: connections open, no answers
		p := testenv.StartRedisProcess(t)
		rdb := newClient(t, p.Addr())
		logs := &syncBuffer{}
		l := newLimiter(t, cfg, rdb, slog.New(slog.NewTextHandler(logs, nil)))
		waitAllowed(t, l)
		p.Pause()
		for range 3 {
			failOpenCase(t, l, timeout)
		}
		p.Resume()
		waitAllowed(t, l)
		out := logs.String()
		t.Logf("log:\n%s", out)
		if n := strings.Count(out, "store failed"); n != 1 {
			t.Fatalf("%d fail-open log lines, want 1 (once a minute at most)", n)
		}
		if !strings.Contains(out, "answering again") {
			t.Fatalf("no recovery line")
		}
	})
}

// waitAllowed retries until Allow stops failing open (the client may need a
// moment to reconnect).
func waitAllowed(t *testing.T, l *Limiter) Decision {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := l.Allow(context.Background(), "t1", "k", "read")
		if !d.FailedOpen {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing open after 10s (count %d)", l.FailOpenCount())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestNewWhileRedisDown(t *testing.T) {
	cfg := baseConfig("as")
	cfg.Timeout = 150 * time.Millisecond

	t.Run("miniredis", func(t *testing.T) {
		m := testenv.Miniredis(t)
		rdb := newClient(t, m.Addr())
		m.Close()
		l := newLimiter(t, cfg, rdb, nil)
		failOpenCase(t, l, cfg.Timeout)
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
		d := waitAllowed(t, l)
		if !d.Allowed || d.Limit != 5 || d.Remaining != 4 {
			t.Fatalf("after restart: %+v", d)
		}
	})

	t.Run("redis-server", func(t *testing.T) {
		p := testenv.StartRedisProcess(t)
		p.Stop()
		rdb := newClient(t, p.Addr())
		l := newLimiter(t, cfg, rdb, nil)
		failOpenCase(t, l, cfg.Timeout)
		p.Restart()
		d := waitAllowed(t, l)
		if !d.Allowed || d.Limit != 5 || d.Remaining != 4 {
			t.Fatalf("after start: %+v", d)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	t.Cleanup(func() { _ = rdb.Close() })
	good := baseConfig("as")
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"read empty", func(c *Config) { c.Read = "" }, "read rate"},
		{"write bad period", func(c *Config) { c.Write = "10-W" }, "write rate"},
		{"admin bad limit", func(c *Config) { c.Admin = "x-S" }, "admin rate"},
		{"tenant zero", func(c *Config) { c.Tenant = "0-M" }, "tenant rate"},
		{"tenant negative", func(c *Config) { c.Tenant = "-5-M" }, "tenant rate"},
		{"tenant no dash", func(c *Config) { c.Tenant = "100" }, "tenant rate"},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "timeout"},
		{"prefix", func(c *Config) { c.Prefix = "a{b}" }, "prefix"},
	}
	for _, tc := range cases {
		cfg := good
		tc.mod(&cfg)
		_, err := New(context.Background(), cfg, rdb, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(context.Background(), good, nil, nil); err == nil {
		t.Error("nil client accepted")
	}
	if r, err := ParseRate("50-s"); err != nil || r.Limit != 50 || r.Period != time.Second {
		t.Errorf("50-s: %+v %v", r, err)
	}
}

func TestHeaders(t *testing.T) {
	now := time.Unix(1000, 300_000_000)
	d := Decision{Allowed: true, Limit: 50, Remaining: 7, Reset: time.Unix(1030, 0)}
	got := d.headersAt(now)
	want := map[string]string{"RateLimit-Limit": "50", "RateLimit-Remaining": "7", "RateLimit-Reset": "30"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("allowed: %v", got)
	}
	d = Decision{Limit: 50, Reset: time.Unix(1000, 0), RetryAfter: time.Second}
	got = d.headersAt(now) // reset already past: 0, Retry-After still >= 1
	want = map[string]string{"RateLimit-Limit": "50", "RateLimit-Remaining": "0", "RateLimit-Reset": "0", "Retry-After": "1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("refused: %v", got)
	}
	if got := (Decision{Allowed: true, FailedOpen: true}).Headers(); len(got) != 0 {
		t.Fatalf("failed open: %v", got)
	}
}

func TestTighter(t *testing.T) {
	r := func(s int64) time.Time { return time.Unix(s, 0) }
	a := Decision{Allowed: true, Limit: 5, Remaining: 3, Reset: r(10)}
	b := Decision{Allowed: true, Limit: 100, Remaining: 1, Reset: r(60)}
	no1 := Decision{Limit: 5, Reset: r(10), RetryAfter: time.Second}
	no2 := Decision{Limit: 100, Reset: r(60), RetryAfter: 50 * time.Second}
	for _, tc := range []struct{ x, y, want Decision }{
		{a, b, b}, {b, a, b}, // fewer remaining
		{a, no2, no2}, {no1, b, no1}, // refusal wins
		{no1, no2, no2}, {no2, no1, no2}, // later reset among refusals
		{a, Decision{Allowed: true, Limit: 9, Remaining: 3, Reset: r(20)}, Decision{Allowed: true, Limit: 9, Remaining: 3, Reset: r(20)}},
	} {
		if got := tighter(tc.x, tc.y); got != tc.want {
			t.Errorf("tighter(%+v, %+v) = %+v", tc.x, tc.y, got)
		}
	}
}

// Benchmarks: the chosen sequential design (credential, then tenant only if
// allowed) against both gets run concurrently, on a real redis-server.
func benchLimiter(b *testing.B) *Limiter {
	rdb := newClient(b, testenv.Redis(b))
	cfg := baseConfig(testenv.Isolate(b))
	cfg.Read, cfg.Tenant, cfg.Timeout = "1000000000-H", "1000000000-H", time.Second
	return newLimiter(b, cfg, rdb, nil)
}

func BenchmarkAllowSequential(b *testing.B) {
	l := benchLimiter(b)
	for b.Loop() {
		if d := l.Allow(context.Background(), "t1", "k", "read"); d.FailedOpen {
			b.Fatal("failed open")
		}
	}
}

func BenchmarkAllowSequentialParallel(b *testing.B) {
	l := benchLimiter(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if d := l.Allow(context.Background(), "t1", "k", "read"); d.FailedOpen {
				b.Error("failed open")
			}
		}
	})
}

// allowConcurrentGets is the alternative design, for comparison only.
func (l *Limiter) allowConcurrentGets(ctx context.Context, tenant, keyID, scope string) error {
	tag := "{" + tenant + "}:rl:"
	var wg sync.WaitGroup
	var err1, err2 error
	wg.Go(func() { _, err1 = l.scopes[scope].Get(ctx, tag+scope+":"+keyID) })
	wg.Go(func() { _, err2 = l.tenant.Get(ctx, tag+"tenant") })
	wg.Wait()
	if err1 != nil {
		return err1
	}
	return err2
}

func BenchmarkAllowConcurrentGets(b *testing.B) {
	l := benchLimiter(b)
	for b.Loop() {
		if err := l.allowConcurrentGets(context.Background(), "t1", "k", "read"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAllowConcurrentGetsParallel(b *testing.B) {
	l := benchLimiter(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := l.allowConcurrentGets(context.Background(), "t1", "k", "read"); err != nil {
				b.Error(err)
			}
		}
	})
}

// TestCountDoesNotFailOpen: Count counts as Allow does, but when the store
// fails it answers the error (ErrorCount) instead of letting the call through.
func TestCountDoesNotFailOpen(t *testing.T) {
	cfg := baseConfig("as")
	cfg.Timeout = 150 * time.Millisecond
	m := testenv.Miniredis(t)
	l := newLimiter(t, cfg, newClient(t, m.Addr()), nil)
	waitAllowed(t, l) // read 1 of 5
	for i := range 3 {
		d, err := l.Count(context.Background(), "t1", "k", ScopeWrite)
		if err != nil || !d.Allowed || d.Limit != 3 || d.Remaining != int64(2-i) {
			t.Fatalf("write %d: %+v %v", i, d, err)
		}
	}
	if d, err := l.Count(context.Background(), "t1", "k", ScopeWrite); err != nil || d.Allowed || d.RetryAfter < time.Second {
		t.Fatalf("write over the limit: %+v %v", d, err)
	}
	m.Close()
	d, err := l.Count(context.Background(), "t1", "k", ScopeAdmin)
	if err == nil || d.Allowed || l.ErrorCount() != 1 || l.FailOpenCount() != 0 {
		t.Fatalf("store down: %+v %v (errors %d, fail-opens %d)", d, err, l.ErrorCount(), l.FailOpenCount())
	}
	if _, err := l.Count(context.Background(), "t1", "k", "nope"); err == nil || l.ErrorCount() != 2 {
		t.Fatalf("unknown scope: %v (errors %d)", err, l.ErrorCount())
	}
}

// TestCounterKeys: the one spelling of the counters, which the store's
// scripts share (internal/store, keys.go), is what the limiter counts on.
func TestCounterKeys(t *testing.T) {
	c, tk := CounterKeys("{acme}", ScopeWrite, "key_7Hq2")
	if c != "{acme}:rl:write:key_7Hq2" || tk != "{acme}:rl:tenant" {
		t.Fatalf("CounterKeys = %q, %q", c, tk)
	}
	m := testenv.Miniredis(t)
	rdb := newClient(t, m.Addr())
	l := newLimiter(t, baseConfig("as"), rdb, nil)
	if d, err := l.Count(context.Background(), "acme", "key_7Hq2", ScopeWrite); err != nil || !d.Allowed {
		t.Fatalf("count: %+v %v", d, err)
	}
	for _, k := range []string{"as:" + c, "as:" + tk} {
		if v, err := rdb.Get(context.Background(), k).Result(); err != nil || v != "1" {
			t.Fatalf("%s = %q %v", k, v, err)
		}
	}
}
