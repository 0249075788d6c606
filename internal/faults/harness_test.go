package faults

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) {
	code := testenv.Main(m)
	for i := range builds {
		if builds[i].dir != "" {
			os.RemoveAll(builds[i].dir)
		}
	}
	os.Exit(code)
}

// builds are the service binaries, each built once per test binary: [0] as
// the tests run (with -race when they do), [1] always without -race (for
// figures of the product itself, such as its memory).
var builds [2]struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// serviceBinary builds cmd/asyncstatus (with -race when the tests run with it).
func serviceBinary(t *testing.T) string { return buildService(t, 0, raceEnabled) }

// plainServiceBinary builds cmd/asyncstatus without -race.
func plainServiceBinary(t *testing.T) string { return buildService(t, 1, false) }

func buildService(t *testing.T, slot int, race bool) string {
	t.Helper()
	build := &builds[slot]
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "asyncstatus-faults-")
		if build.err != nil {
			return
		}
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		build.path = filepath.Join(build.dir, "asyncstatus")
		args := []string{"build", "-o", build.path}
		if race {
			args = append(args, "-race")
		}
		args = append(args, "github.com/asyncstatus/asyncstatus/cmd/asyncstatus")
		out, err := exec.Command(gobin, args...).CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

type syncBuffer = testenv.Buffer

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

// environ is the service's environment: the test's own, without any
// ASYNCSTATUS_ variable, plus env.
func environ(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ASYNCSTATUS_") {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serviceBinary(t), args...)
	cmd.Env = environ(env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("asyncstatus %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
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
	t      *testing.T
	cmd    *exec.Cmd
	base   string
	stderr *syncBuffer
	done   chan struct{}
	err    error // the exit, once done is closed
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
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	e := map[string]string{"ASYNCSTATUS_HTTP_ADDR": addr, "ASYNCSTATUS_CONSOLE_ADDR": "off"}
	for k, v := range env {
		e[k] = v
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = environ(e)
	cmd.SysProcAttr = sysProcAttr()
	s := &service{t: t, cmd: cmd, base: "http://" + addr, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = io.Discard, s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-s.done
			}
		}
		if t.Failed() {
			log := s.stderr.String()
			// a race report sits where the race happened, usually far above the tail
			if i := strings.Index(log, "WARNING: DATA RACE"); i >= 0 {
				t.Logf("service log, from its first race report (200 lines):\n%s", head(log[i:], 200))
			}
			t.Logf("service log (last 60 lines):\n%s", tail(log, 60))
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(s.base + "/healthz")
		if err == nil {
			res.Body.Close()
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("serve exited: %v\n%s", s.err, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up:\n%s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// terminate sends SIGTERM and returns the exit error (nil: status 0).
func (s *service) terminate() error {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.done:
		return s.err
	case <-time.After(20 * time.Second):
		s.t.Fatal("serve did not exit within 20s of SIGTERM")
		return nil
	}
}

// alive fails the test if the service exited.
func (s *service) alive() {
	s.t.Helper()
	select {
	case <-s.done:
		s.t.Fatalf("the service exited: %v\n%s", s.err, tail(s.stderr.String(), 40))
	default:
	}
}

// cpuTime is the CPU time (user + system) the service has used so far, from
// /proc; ok is false where there is no /proc.
func (s *service) cpuTime() (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
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

// head is the first n lines of s.
func head(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(len(lines), n)], "\n")
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
