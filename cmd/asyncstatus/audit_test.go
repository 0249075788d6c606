package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// auditSecret is in every context, progress message, result and reason the
// test sends; no audit line may hold it.
const auditSecret = "s3cr3t-payload"

// TestAuditSurvivesKill runs the built binary against Redis with the file sink
// pointing into a directory that does not exist yet: transitions are answered,
// /readyz and /metrics report the failing sink and its backlog. Then serve is
// SIGKILLed right after a transition was answered, the directory is made, and
// a new serve process writes every event of the first one's requests to the
// file: each line JSON, none holding a payload, the API key or a poll token.
func TestAuditSurvivesKill(t *testing.T) {
	bin := buildBinary(t)
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	dir := filepath.Join(t.TempDir(), "audit")
	path := filepath.Join(dir, "audit.log")
	env := binaryEnv(testenv.Redis(t), addr,
		"ASYNCSTATUS_REDIS_KEY_PREFIX="+testenv.Isolate(t),
		"ASYNCSTATUS_WEBHOOKS_ENABLED=false",
		"ASYNCSTATUS_RATELIMIT_ENABLED=false",
		"ASYNCSTATUS_AUDIT_SINK=file", "ASYNCSTATUS_AUDIT_FILE="+path, "ASYNCSTATUS_AUDIT_CLAIM_AFTER=1s")
	key := binaryKey(t, bin, env, "acme", "read,write,admin")
	base := "http://" + addr

	serve := func() (kill func(), log *syncBuffer) {
		cmd, log, exited := runServe(t, bin, env)
		kill = sync.OnceFunc(func() { _ = cmd.Process.Kill(); <-exited })
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if res, err := http.Get(base + "/readyz"); err == nil {
				res.Body.Close()
				if res.StatusCode == 200 {
					return kill, log
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve did not come up:\n%s", log.String())
			}
		}
	}
	mustPost := func(path, body string, want int) map[string]any {
		t.Helper()
		code, b := post(base+path, key, body)
		if code != want {
			t.Fatalf("POST %s: %d %s", path, code, b)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	// events[id] = how many events (versions) the request has
	events := map[string]int{}
	var tokens []string
	create := func() string {
		r := mustPost("/v1/requests", `{"type":"report.build","context":{"k":"`+auditSecret+`"}}`, 202)
		id, _ := r["id"].(string)
		tok, _ := r["poll_token"].(string)
		tokens = append(tokens, tok)
		events[id] = 1
		return id
	}

	kill, log := serve()
	done := create()
	mustPost("/v1/requests/"+done+"/processing", `{"percent":10,"message":"`+auditSecret+`"}`, 200)
	mustPost("/v1/requests/"+done+"/processing", `{"percent":60,"message":"`+auditSecret+`"}`, 200)
	mustPost("/v1/requests/"+done+"/complete", `{"result_type":"answer","result":{"k":"`+auditSecret+`"}}`, 200)
	events[done] = 4
	failed := create()
	mustPost("/v1/requests/"+failed+"/fail", `{"code":"ERR_LEDGER","reason":"`+auditSecret+`"}`, 200)
	events[failed] = 2
	deleted := create()
	mustPost("/v1/requests/"+deleted+"/cancel", `{"reason":"`+auditSecret+`"}`, 200)
	req, _ := http.NewRequest("DELETE", base+"/v1/requests/"+deleted, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 204 {
		t.Fatalf("delete: %v %v", res, err)
	}
	res.Body.Close()
	events[deleted] = 3

	// The sink fails: the service says so (once the drainer tried, within its
	// linger of the writes), and counts the backlog.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, _, body := get(t, base+"/readyz")
		var ready struct {
			Status string
			Audit  struct{ Status, Detail string }
		}
		if err := json.Unmarshal([]byte(body), &ready); err != nil || ready.Status != "ready" {
			t.Fatalf("/readyz: %s", body)
		}
		if ready.Audit.Status == "failing" && strings.Contains(ready.Audit.Detail, path) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said the audit sink fails: %s", body)
		}
	}
	backlog := regexp.MustCompile(`(?m)^asyncstatus_audit_backlog (\d+)`)
	// The gauge is counted at the sink's first failure and then every 10 s: the
	// first count may have come before all nine events were made.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, _, m := get(t, base+"/metrics")
		if g := backlog.FindStringSubmatch(m); g != nil && strings.Contains(m, "asyncstatus_audit_sink_up 0") {
			if n, _ := strconv.Atoi(g[1]); n >= 9 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed a backlog of at least the 9 events made:\n%s", m)
		}
	}
	if !strings.Contains(log.String(), "audit sink failing") {
		t.Fatalf("the log does not say the sink fails:\n%s", log.String())
	}
	last := create()
	mustPost("/v1/requests/"+last+"/complete", `{"result_type":"answer","result":{"k":"`+auditSecret+`"}}`, 200)
	events[last] = 2
	kill() // SIGKILL right after the answer: no shutdown, no last pass

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	serve()
	var lines []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		lines = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if hasEvents(lines, events) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart the file holds %d lines, not every event:\n%s", len(lines), b)
		}
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		for _, bad := range append([]string{auditSecret, key}, tokens...) {
			if strings.Contains(l, bad) {
				t.Fatalf("audit line holds a secret or payload (%.12s...): %s", bad, l)
			}
		}
		if m["request_id"] == deleted && m["type"] == "request.deleted" && (m["by"] != keyID(key) || m["to"] != nil) {
			t.Fatalf("delete line %s", l)
		}
		if m["request_id"] == failed && m["type"] == "request.failed" && m["failure_code"] != "ERR_LEDGER" {
			t.Fatalf("failure line %s", l)
		}
	}
}

// hasEvents reports whether lines hold every version 1..n of each request.
func hasEvents(lines []string, events map[string]int) bool {
	seen := map[string]bool{}
	for _, l := range lines {
		var x struct {
			EventID string `json:"event_id"`
		}
		if json.Unmarshal([]byte(l), &x) == nil {
			seen[x.EventID] = true
		}
	}
	for id, n := range events {
		for v := 1; v <= n; v++ {
			if !seen[fmt.Sprintf("evt_%s_%d", id, v)] {
				return false
			}
		}
	}
	return true
}

// keyID is the public id of an API key (ask_<16 id chars><secret> -> key_<id>).
func keyID(key string) string { return "key_" + strings.TrimPrefix(key, "ask_")[:16] }

// TestServeAuditLogSink: by default (audit.sink log) the embedded serve writes
// each event as a JSON log line marked "msg":"audit", with the deleter's key
// id, and /readyz says the audit sink is ok.
func TestServeAuditLogSink(t *testing.T) {
	base, out, logs, _ := startServe(t, map[string]string{})
	m := keyLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no demo key printed:\n%s", out.String())
	}
	key := m[1]
	code, created, _ := do(t, "POST", base+"/v1/requests", key, `{"type":"statement.export","context":{"k":"`+auditSecret+`"}}`)
	if code != 202 {
		t.Fatalf("create: %d %v", code, created)
	}
	id := created["id"].(string)
	if code, _, _ := do(t, "DELETE", base+"/v1/requests/"+id, key, ""); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	want := map[string]string{"request.created": "", "request.deleted": keyID(key)}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		found := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			var rec struct {
				Msg   string
				Audit map[string]any
			}
			if json.Unmarshal([]byte(l), &rec) != nil || rec.Msg != "audit" {
				continue
			}
			if strings.Contains(l, auditSecret) || strings.Contains(l, key) {
				t.Fatalf("audit line holds a payload or the key: %s", l)
			}
			if rec.Audit["request_id"] != id {
				continue
			}
			switch rec.Audit["type"] {
			case "request.created":
				found++
			case "request.deleted":
				if rec.Audit["by"] != want["request.deleted"] {
					t.Fatalf("delete line %s", l)
				}
				found++
			}
		}
		if found == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit lines for %s in the log:\n%s", id, logs.String())
		}
	}
	_, _, body := get(t, base+"/readyz")
	if !strings.Contains(body, `"audit":{"detail":"ok","status":"ok"}`) {
		t.Fatalf("/readyz: %s", body)
	}
}
