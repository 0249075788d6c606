package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConfigCheckShowsMasks: `config check` prints the effective configuration
// with the poll-token secret and the Redis password replaced by "***" (and the
// rest of the URL kept), beyond TestConfigCheckMasksSecrets's "not leaked".
func TestConfigCheckShowsMasks(t *testing.T) {
	const secret = "s3cr3t-poll-token-key-0123456789abcdef"
	const password = "hunter2-redis-pass"
	const sealKey = "seal-key-for-webhook-secrets-0123456789"
	out, _, err := runCmd(t, map[string]string{
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": secret,
		"ASYNCSTATUS_REDIS_URL":              "redis://app:" + password + "@redis.internal:6380/2",
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY":    sealKey,
	}, "config", "check")
	if err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	for _, s := range []string{secret, password, "hunter2", sealKey} {
		if strings.Contains(out, s) {
			t.Fatalf("config check prints the secret %q:\n%s", s, out)
		}
	}
	for _, want := range []string{"poll_token_secret: '***'", "redis://app:***@redis.internal:6380/2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("config check output lacks %q:\n%s", want, out)
		}
	}
}

// serveWith runs `serve` with args until the test ends, which fails if serve
// then stops with an error; it returns the base URL and the log (stderr).
func serveWith(t *testing.T, env map[string]string, args ...string) (string, *syncBuffer) {
	t.Helper()
	base, _, errb, stop := startServe(t, env, args...)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return base, errb
}

func get(t *testing.T, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// TestServeMetricsAndAccessLog: serve exposes /metrics and /openapi.json without
// a credential and logs one JSON line per request.
func TestServeMetricsAndAccessLog(t *testing.T) {
	base, logs := serveWith(t, map[string]string{"ASYNCSTATUS_LIFECYCLE_SWEEP_INTERVAL": "100ms"})
	if code, _, _ := get(t, base+"/v1/requests/01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", "X-Request-Id", "trace-cmd-1"); code != 401 {
		t.Fatalf("unauthenticated poll: %d", code)
	}
	if code, h, body := get(t, base+"/openapi.json"); code != 200 || !strings.Contains(body, `"openapi": "3.1.0"`) || h.Get("X-Request-Id") == "" {
		t.Fatalf("/openapi.json: %d", code)
	}
	var body string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var code int
		code, _, body = get(t, base+"/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		if strings.Contains(body, "asyncstatus_sweeper_runs_total") && !strings.Contains(body, "asyncstatus_sweeper_runs_total 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sweeper never showed a run:\n%s", body)
		}
	}
	for _, want := range []string{
		`asyncstatus_embedded_store 1`,
		`asyncstatus_build_info{goversion="go`,
		`version="dev"} 1`,
		`asyncstatus_http_requests_total{class="4xx",method="GET",route="/v1/requests/:id"} 1`,
		`asyncstatus_http_requests_total{class="2xx",method="GET",route="/openapi.json"} 1`,
		`asyncstatus_transitions_total{to="expired",transition="sweep_expire"} 0`,
		`asyncstatus_sweeper_lag_seconds`,
		`go_goroutines`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// a call's access line is written after its answer: the last scrape's may lag
	for deadline := time.Now().Add(2 * time.Second); !strings.Contains(logs.String(), `"route":"/metrics"`) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	var access []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Text())
		}
		if l["msg"] == "request" {
			access = append(access, l)
		}
	}
	var poll map[string]any
	for _, l := range access {
		if l["request_id"] == "trace-cmd-1" {
			poll = l
		}
	}
	if len(access) < 4 || poll == nil || poll["route"] != "/v1/requests/:id" || poll["status"] != float64(401) ||
		poll["code"] != "UNAUTHENTICATED" || poll["method"] != "GET" {
		t.Fatalf("access log:\n%s", logs)
	}
}

// TestServeLogFormatText: --log-format text overrides log.format.
func TestServeLogFormatText(t *testing.T) {
	base, logs := serveWith(t, map[string]string{"ASYNCSTATUS_LOG_FORMAT": "json"}, "--log-format", "text")
	get(t, base+"/healthz", "X-Request-Id", "trace-text")
	for deadline := time.Now().Add(2 * time.Second); !strings.Contains(logs.String(), "request_id=trace-text"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no text access line:\n%s", logs)
		}
	}
	if !strings.Contains(logs.String(), "level=INFO msg=request method=GET route=/healthz status=200") || strings.Contains(logs.String(), `{"time"`) {
		t.Fatalf("want text lines:\n%s", logs)
	}
	_, _, err := runCmd(t, map[string]string{}, "serve", "--log-format", "xml")
	if err == nil || exitCode(err) != 2 {
		t.Fatalf("--log-format xml: %v", err)
	}
}
