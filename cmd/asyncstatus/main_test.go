package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

type syncBuffer = testenv.Buffer

// envOf is an environment ("NAME=value" entries) of the given variables.
func envOf(kv map[string]string) []string {
	env := make([]string, 0, len(kv))
	for k, v := range kv {
		env = append(env, k+"="+v)
	}
	return env
}

// runCmd runs one command to completion.
func runCmd(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb syncBuffer
	err := run(context.Background(), args, envOf(env), &out, &errb)
	return out.String(), errb.String(), err
}

var keyLine = regexp.MustCompile(`(?m)^(ask_[A-Za-z0-9_-]+)$`)

// serving starts `serve` in the background and returns its base URL, its stdout and
// a stop function that cancels it (as SIGTERM does) and returns run's error.
func serving(t *testing.T, env map[string]string) (string, *syncBuffer, func() error) {
	t.Helper()
	base, out, _, stop := startServe(t, env)
	return base, out, stop
}

// startServe is serving that also returns serve's log (stderr); args follow
// "serve" on its command line.
func startServe(t *testing.T, env map[string]string, args ...string) (string, *syncBuffer, *syncBuffer, func() error) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	env["ASYNCSTATUS_HTTP_ADDR"] = addr
	if env["ASYNCSTATUS_CONSOLE_ADDR"] == "" {
		env["ASYNCSTATUS_CONSOLE_ADDR"] = "off" // never the default port, which tests would share
	}
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"serve"}, args...), envOf(env), out, errb) }()
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		if res, err := http.Get(base + "/healthz"); err == nil {
			res.Body.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v\n%s", err, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			t.Fatal("serve did not stop")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return base, out, errb, stop
}

func do(t *testing.T, method, url, key, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, m, res.Header
}

// TestServeEmbedded is the README walk-through: no Redis configured, a demo key
// printed, create -> processing -> complete -> poll, then a clean stop.
func TestServeEmbedded(t *testing.T) {
	base, out, stop := serving(t, map[string]string{})
	m := keyLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no demo key printed:\n%s", out.String())
	}
	key := m[1]
	code, created, h := do(t, "POST", base+"/v1/requests", key, `{"type":"statement.export","context":{"account":"acc_1"}}`)
	if code != 202 || h.Get("Location") != base+"/v1/requests/"+created["id"].(string) {
		t.Fatalf("create: %d %v %v", code, created, h)
	}
	u := h.Get("Location")
	if code, r, _ := do(t, "POST", u+"/processing", key, `{"percent":50}`); code != 200 || r["status"] != "processing" {
		t.Fatalf("processing: %d %v", code, r)
	}
	if code, r, _ := do(t, "POST", u+"/complete", key, `{"result_type":"confirmation","result":{"confirmed":true}}`); code != 200 || r["status"] != "succeeded" {
		t.Fatalf("complete: %d %v", code, r)
	}
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("X-Poll-Token", created["poll_token"].(string))
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("poll by token: %v %v", err, res)
	}
	res.Body.Close()
	if code, _, _ := do(t, "GET", base+"/readyz", "", ""); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve returned %v after its context ended, want nil (exit 0)", err)
	}
}

// TestServeEmbeddedConsole: on the embedded store serve prints the console's
// URL and a one-time sign-in link for the demo key; the link signs in once,
// and the log never holds it.
func TestServeEmbeddedConsole(t *testing.T) {
	caddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	_, out, errb, stop := startServe(t, map[string]string{"ASYNCSTATUS_CONSOLE_ADDR": caddr})
	if !strings.Contains(out.String(), "Operator console: http://"+caddr+"/") {
		t.Fatalf("no console URL printed:\n%s", out.String())
	}
	m := regexp.MustCompile(`(?m)^(http://\S+/signin/once\?t=\S+)$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no sign-in link printed:\n%s", out.String())
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/t/demo/requests" || len(res.Cookies()) == 0 {
		t.Fatalf("the link: %d %q %v", res.StatusCode, res.Header.Get("Location"), res.Header)
	}
	res, err = noRedirect.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the link a second time: %d, want 401", res.StatusCode)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	token := m[1][strings.Index(m[1], "t=")+2:]
	if strings.Contains(errb.String(), token) {
		t.Fatal("the sign-in token is in the log")
	}
}

// TestShutdownFinishesInFlight: a request in flight when the stop comes still gets
// its whole answer.
func TestShutdownFinishesInFlight(t *testing.T) {
	base, out, stop := serving(t, map[string]string{})
	key := keyLine.FindStringSubmatch(out.String())[1]
	// A slow upload keeps a request in flight across the stop.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", base+"/v1/requests", pr)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	type result struct {
		code int
		err  error
	}
	got := make(chan result, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{0, err}
			return
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		got <- result{res.StatusCode, nil}
	}()
	if _, err := pw.Write([]byte(`{"type":`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	stopErr := make(chan error, 1)
	go func() { stopErr <- stop() }()
	time.Sleep(200 * time.Millisecond)
	_, _ = pw.Write([]byte(`"x"}`))
	pw.Close()
	r := <-got
	if r.err != nil || r.code != 202 {
		t.Fatalf("in-flight request: %d %v", r.code, r.err)
	}
	if err := <-stopErr; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func TestAdminCommands(t *testing.T) {
	redisURL := "redis://" + testenv.Redis(t) + "/0"
	env := map[string]string{"ASYNCSTATUS_REDIS_URL": redisURL, "ASYNCSTATUS_REDIS_KEY_PREFIX": testenv.Isolate(t),
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": strings.Repeat("s", 32), "ASYNCSTATUS_WEBHOOKS_SECRET_KEY": strings.Repeat("w", 32)}
	out, _, err := runCmd(t, env, "keys", "create", "--tenant", "acme", "--scopes", "read,write", "--name", "ci")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || !keyLine.MatchString(lines[0]) {
		t.Fatalf("keys create must print the key alone on stdout, got %q", out)
	}
	key := lines[0]
	opOut, _, err := runCmd(t, env, "keys", "create", "--operator", "--name", "ops")
	if err != nil || !keyLine.MatchString(strings.TrimSpace(opOut)) {
		t.Fatalf("keys create --operator: %v %q", err, opOut)
	}
	if _, _, err := runCmd(t, env, "keys", "create", "--operator", "--tenant", "acme"); err == nil {
		t.Fatal("--operator with --tenant must be refused")
	}
	if out, _, err := runCmd(t, env, "keys", "list", "--operator"); err != nil || !strings.Contains(out, "operator") ||
		!strings.Contains(out, "key_"+strings.TrimSpace(opOut)[4:20]) {
		t.Fatalf("keys list --operator: %v\n%s", err, out)
	}
	out, _, err = runCmd(t, env, "keys", "list", "--tenant", "acme")
	keyID := "key_" + key[4:20]
	if err != nil || !strings.Contains(out, keyID) || !strings.Contains(out, "read,write") || strings.Contains(out, key) {
		t.Fatalf("keys list: %v\n%s", err, out)
	}

	base, _, _ := serving(t, env)
	code, created, _ := do(t, "POST", base+"/v1/requests", key, `{"type":"x"}`)
	if code != 202 {
		t.Fatalf("create with the CLI's key: %d", code)
	}
	id := created["id"].(string)
	if code, r, _ := do(t, "GET", base+"/v1/requests/"+id, strings.TrimSpace(opOut), ""); code != 401 || r["code"] != "UNAUTHENTICATED" {
		t.Fatalf("an operator key on the public API: %d %v, want 401", code, r)
	}
	if _, _, err := runCmd(t, env, "tenants", "freeze", "acme"); err != nil {
		t.Fatal(err)
	}
	if code, r, _ := do(t, "GET", base+"/v1/requests/"+id, key, ""); code != 403 || r["code"] != "TENANT_FROZEN" {
		t.Fatalf("frozen poll: %d %v", code, r)
	}
	if _, _, err := runCmd(t, env, "tenants", "unfreeze", "acme"); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := do(t, "GET", base+"/v1/requests/"+id, key, ""); code != 200 {
		t.Fatalf("unfrozen poll: %d", code)
	}
	if out, _, err := runCmd(t, env, "keys", "revoke", keyID); err != nil || !strings.Contains(out, keyID) {
		t.Fatalf("revoke: %v %s", err, out)
	}
	if _, _, err := runCmd(t, env, "keys", "revoke", keyID); err == nil {
		t.Fatal("revoking twice must fail")
	}
	// the serving process caches keys for auth.key_cache_ttl (default 10s)
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, _ := do(t, "GET", base+"/v1/requests/"+id, key, "")
		if code == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoked key still accepted after the cache TTL: %d", code)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func TestCommandLineErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{}, nil, "usage"},
		{[]string{"frobnicate"}, nil, "unknown command"},
		{[]string{"keys", "create", "--tenant", "Bad Tenant", "--scopes", "read"}, nil, "--tenant"},
		{[]string{"keys", "create", "--tenant", "acme", "--scopes", "read,root"}, nil, "scope"},
		{[]string{"tenants", "melt", "acme"}, nil, "freeze"},
		{[]string{"serve"}, map[string]string{"ASYNCSTATUS_LIFECYCLE_PROCESSING_TIMEOUT": "soon"}, "lifecycle.processing_timeout"},
		{[]string{"serve"}, map[string]string{"ASYNCSTATUS_POLLING_SCHEDULE": "1s,90s"}, "polling.schedule"},
		{[]string{"serve"}, map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://127.0.0.1:1/0"}, "auth.poll_token_secret"},
		// Both secrets missing: both named in one refusal.
		{[]string{"serve"}, map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://127.0.0.1:1/0"}, "webhooks.secret_key"},
		{[]string{"serve"}, map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://127.0.0.1:1/0",
			"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": strings.Repeat("s", 32)}, "webhooks.secret_key"},
		{[]string{"serve"}, map[string]string{"ASYNCSTATUS_WEBHOOKS_SECRET_KEY": "short"}, "webhooks.secret_key"},
		{[]string{"config", "check", "--config", "/nonexistent.yaml"}, nil, "nonexistent"},
	} {
		_, _, err := runCmd(t, c.env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
	out, _, err := runCmd(t, nil, "version")
	if err != nil || !strings.HasPrefix(out, "asyncstatus ") {
		t.Fatalf("version: %v %q", err, out)
	}
}

func TestConfigCheckMasksSecrets(t *testing.T) {
	out, _, err := runCmd(t, map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://user:hunter2hunter2@127.0.0.1:6390/0",
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": "topsecret-topsecret-topsecret-xx",
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY":    "sealsecret-sealsecret-sealsecret-xx"}, "config", "check")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "hunter2") || strings.Contains(out, "topsecret") || strings.Contains(out, "sealsecret") || !strings.Contains(out, "127.0.0.1:6390") {
		t.Fatalf("config check output leaks or lacks values:\n%s", out)
	}
}

// TestServeAppliesMaxProcs: runtime.max_procs sets GOMAXPROCS before serve
// starts, and the start line says what it runs with.
func TestServeAppliesMaxProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	runtime.GOMAXPROCS(2)
	_, _, errb, stop := startServe(t, map[string]string{"ASYNCSTATUS_RUNTIME_MAX_PROCS": "1"})
	got := runtime.GOMAXPROCS(0)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got != 1 || !strings.Contains(errb.String(), `"max_procs":1`) {
		t.Fatalf("GOMAXPROCS %d, want 1; log:\n%s", got, errb.String())
	}
}

// TestWarnsAboutRedisConfig: docs/operations.md requires maxmemory-policy
// noeviction and appendonly yes, so serve warns at start about either.
func TestWarnsAboutRedisConfig(t *testing.T) {
	for _, c := range []struct {
		policy, aof   string
		evicts, loses bool // the warnings expected
	}{{"allkeys-lru", "yes", true, false}, {"noeviction", "no", false, true}, {"noeviction", "yes", false, false}} {
		r := testenv.StartRedisProcess(t, "--maxmemory-policy", c.policy, "--appendonly", c.aof)
		env := map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://" + r.Addr() + "/0",
			"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": strings.Repeat("s", 32), "ASYNCSTATUS_WEBHOOKS_SECRET_KEY": strings.Repeat("w", 32)}
		_, _, errb, stop := startServe(t, env)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		evicts := strings.Contains(errb.String(), "maxmemory-policy IS NOT noeviction")
		loses := strings.Contains(errb.String(), "appendonly IS NOT yes")
		if evicts != c.evicts || loses != c.loses {
			t.Fatalf("policy %s, appendonly %s: warnings (eviction %v, AOF %v), want (%v, %v):\n%s",
				c.policy, c.aof, evicts, loses, c.evicts, c.loses, errb.String())
		}
	}
}
