package faults

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// serviceBinary is cmd/asyncstatus, built once (with -race when the tests run
// with it, which also reuses the packages that `go test -race` compiled).
func serviceBinary(t *testing.T) string { return testenv.ServiceBinary(t, testenv.RaceEnabled) }

// plainServiceBinary is cmd/asyncstatus built without -race (for figures of the
// product itself, such as its memory).
func plainServiceBinary(t *testing.T) string { return testenv.ServiceBinary(t, false) }

// lines counts the lines of s containing sub.
func countLines(s, sub string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			n++
		}
	}
	return n
}

// baseEnv is the configuration every fault test starts from: short deadlines,
// a sweeper that ticks often (so that its behaviour during an outage shows),
// rate limits on but generous, text logs.
func baseEnv(opTimeout time.Duration) map[string]string {
	return map[string]string{
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET":   strings.Repeat("f", 32),
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY":      strings.Repeat("w", 32),
		"ASYNCSTATUS_REDIS_OP_TIMEOUT":         opTimeout.String(),
		"ASYNCSTATUS_LIFECYCLE_SWEEP_INTERVAL": "200ms",
		"ASYNCSTATUS_AUTH_KEY_CACHE_TTL":       "5m",
		"ASYNCSTATUS_RATELIMIT_ENABLED":        "true",
		"ASYNCSTATUS_RATELIMIT_READ":           "100000-S",
		"ASYNCSTATUS_RATELIMIT_WRITE":          "100000-S",
		"ASYNCSTATUS_RATELIMIT_ADMIN":          "100000-S",
		"ASYNCSTATUS_RATELIMIT_TENANT":         "1000000-S",
		"ASYNCSTATUS_POLLING_SCHEDULE":         "1s",
		"ASYNCSTATUS_HTTP_SHUTDOWN_TIMEOUT":    "10s",
		"ASYNCSTATUS_LOG_FORMAT":               "text",
		"ASYNCSTATUS_LOG_LEVEL":                "info",
		"ASYNCSTATUS_IDEMPOTENCY_TTL":          "1h",
		"ASYNCSTATUS_LIFECYCLE_QUEUED_TIMEOUT": "1h",
		"ASYNCSTATUS_RETENTION_TERMINAL":       "1h",
	}
}

// command runs one asyncstatus command to completion and returns its stdout.
func command(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	return testenv.ServiceCommand(t, serviceBinary(t), env, args...)
}

// newKey makes an API key with every scope for tenant.
func newKey(t *testing.T, env map[string]string, tenant string) string {
	t.Helper()
	// Making a key is set-up, not the fault under test: give it a generous deadline
	// (a fresh cluster on a loaded machine can take longer than the service's
	// short op_timeout to first answer).
	setup := make(map[string]string, len(env)+1)
	for k, v := range env {
		setup[k] = v
	}
	setup["ASYNCSTATUS_REDIS_OP_TIMEOUT"] = "10s"
	out := strings.TrimSpace(command(t, setup, "keys", "create", "--tenant", tenant, "--scopes", "read,write,admin", "--name", "faults"))
	if !strings.HasPrefix(out, "ask_") || strings.Contains(out, "\n") {
		t.Fatalf("keys create printed %q", out)
	}
	return out
}

// service is one running `asyncstatus serve` child process.
type service struct {
	*testenv.Service
	t    *testing.T
	base string
}

// startService runs `asyncstatus serve` with env on a free loopback port and
// waits until /healthz answers. It is stopped (SIGTERM, then SIGKILL) when the
// test ends.
func startService(t *testing.T, env map[string]string) *service {
	t.Helper()
	return startServiceOf(t, serviceBinary(t), env)
}

// startServiceOf is startService for the binary bin.
func startServiceOf(t *testing.T, bin string, env map[string]string) *service {
	t.Helper()
	s := testenv.StartService(t, bin, env)
	return &service{Service: s, t: t, base: s.URL()}
}

// terminate sends SIGTERM and returns the exit error (nil: status 0).
func (s *service) terminate() error {
	s.t.Helper()
	return s.Terminate()
}

// alive fails the test if the service exited.
func (s *service) alive() {
	s.t.Helper()
	if gone, err := s.Exited(); gone {
		s.t.Fatalf("the service exited: %v\n%s", err, tail(s.Log(), 40))
	}
}

// cpuTime is the CPU time (user + system) the service has used so far, from
// /proc; ok is false where there is no /proc.
func (s *service) cpuTime() (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.PID()))
	if err != nil {
		return 0, false
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the line, in clock ticks (100 per second on Linux).
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitOnline waits until WAIT 1 on the master at addr confirms a write: its
// replica has synced and loaded what it was sent.
func waitOnline(t *testing.T, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer c.Close()
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for {
		pipe := c.Pipeline()
		pipe.Set(ctx, "probe", "1", time.Minute)
		wait := redis.NewIntCmd(ctx, "wait", 1, 100)
		_ = pipe.Process(ctx, wait)
		if _, err := pipe.Exec(ctx); err == nil && wait.Val() >= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no replica confirms writes", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metrics reads samples without labels from one scrape of the service's
// /metrics; a name that is not exported is missing from the map.
func (s *service) metrics(names ...string) map[string]float64 {
	out := map[string]float64{}
	res, err := http.Get(s.base + "/metrics")
	if err != nil {
		return out
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for line := range strings.Lines(string(b)) {
		for _, name := range names {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					out[name] = f
				}
			}
		}
	}
	return out
}
