package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// buildBinary builds this command into a temporary directory, with extra go
// build flags.
func buildBinary(t *testing.T, flags ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	path := filepath.Join(t.TempDir(), "asyncstatus")
	args := append([]string{"build", "-o", path}, flags...)
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command(gobin, append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s .: %v\n%s", strings.Join(args, " "), err, out)
	}
	return path
}

// binaryKey makes an API key with the built binary's `keys create`.
func binaryKey(t *testing.T, bin string, env []string, tenant, scopes string) string {
	t.Helper()
	keyCmd := exec.Command(bin, "keys", "create", "--tenant", tenant, "--scopes", scopes)
	keyCmd.Env = env
	out, err := keyCmd.Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// runServe starts the built binary's serve with env; it is killed when the
// test ends, and its log shown if the test failed. exited receives Wait's
// result.
func runServe(t *testing.T, bin string, env []string) (*exec.Cmd, *syncBuffer, <-chan error) {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	// the console off: tests would otherwise all compete for its default port
	cmd.Env = append(slices.Clip(env), "ASYNCSTATUS_CONSOLE_ADDR=off")
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("serve's log:\n%s", stderr.String())
		}
	})
	return cmd, stderr, exited
}

// binaryEnv is the environment of a built binary's serve on the Redis at
// redisAddr (database 0), listening on addr, with the secrets that serve
// requires on a real Redis; extra adds variables (a later one wins).
func binaryEnv(redisAddr, addr string, extra ...string) []string {
	return append([]string{
		"ASYNCSTATUS_REDIS_URL=redis://" + redisAddr + "/0",
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET=" + strings.Repeat("s", 32),
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY=" + strings.Repeat("w", 32),
		"ASYNCSTATUS_HTTP_ADDR=" + addr,
		"PATH=" + os.Getenv("PATH"),
	}, extra...)
}

// waitAccepting creates requests of type warm.up until serve at base accepts
// one (202), for at most 20 s; log is serve's, shown when it does not.
func waitAccepting(t *testing.T, base, key string, log *syncBuffer) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := post(base+"/v1/requests", key, `{"type":"warm.up"}`); code == 202 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up:\n%s", log.String())
		}
	}
}

// TestSIGTERMFinishesInFlight runs the built binary, puts requests in flight —
// some waiting on a frozen Redis, one still uploading its body — sends SIGTERM,
// and checks that the listener closes at once, that every request in flight gets
// its complete answer, and that the process exits with status 0 (docs/reference.md §11).
func TestSIGTERMFinishesInFlight(t *testing.T) {
	bin := buildBinary(t)
	redisProc := testenv.StartRedisProcess(t)
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	env := binaryEnv(redisProc.Addr(), addr,
		// Long enough for the requests held by the frozen Redis to outlive the
		// SIGTERM and be answered normally once it thaws.
		"ASYNCSTATUS_REDIS_OP_TIMEOUT=5s",
		"ASYNCSTATUS_HTTP_SHUTDOWN_TIMEOUT=10s",
		"ASYNCSTATUS_RATELIMIT_WRITE=100000-S",
		"ASYNCSTATUS_RATELIMIT_TENANT=100000-S")
	key := binaryKey(t, bin, env, "acme", "read,write")

	cmd, stderr, exited := runServe(t, bin, env)
	base := "http://" + addr
	waitAccepting(t, base, key, stderr)

	// In flight 1: requests waiting on Redis, which is frozen.
	redisProc.Pause()
	const waiting = 20
	type result struct {
		code int
		body []byte
		err  error
	}
	results := make(chan result, waiting+1)
	var wg sync.WaitGroup
	for i := range waiting {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := post(base+"/v1/requests", key, fmt.Sprintf(`{"type":"in.flight","context":{"i":%d}}`, i))
			results <- result{code: code, body: body}
		}()
	}
	// In flight 2: an upload that is still sending its body.
	pr, pw := io.Pipe()
	wg.Add(1)
	go func() {
		defer wg.Done()
		req, _ := http.NewRequest("POST", base+"/v1/requests", pr)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			results <- result{err: err}
			return
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		results <- result{code: res.StatusCode, body: b, err: err}
	}()
	if _, err := pw.Write([]byte(`{"type":`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The listener closes at once: a new connection is refused.
	refused := false
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			refused = true
			break
		}
		c.Close()
	}
	if !refused {
		t.Error("new connections were still accepted 3s after SIGTERM")
	}
	select {
	case err := <-exited:
		t.Fatalf("serve exited (%v) with requests in flight", err)
	default:
	}
	_, _ = pw.Write([]byte(`"slow.upload"}`))
	pw.Close()
	redisProc.Resume()

	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		n++
		var m map[string]any
		if r.err != nil || r.code != 202 || json.Unmarshal(r.body, &m) != nil || m["id"] == nil {
			t.Errorf("request in flight at SIGTERM: %d %v %s", r.code, r.err, r.body)
		}
	}
	if n != waiting+1 {
		t.Errorf("%d answers, want %d", n, waiting+1)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	if !strings.Contains(stderr.String(), "shutting down") {
		t.Errorf("no shutdown line in the log:\n%s", stderr.String())
	}
}

// post sends a JSON body with a fresh connection per call and returns the status
// code (0 on a transport error) and the body.
func post(url, key, body string) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, bytes.TrimSpace(b)
}
