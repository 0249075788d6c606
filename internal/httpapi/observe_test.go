package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/memconn"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

type syncBuffer struct{ testenv.Buffer }

// lines decodes the JSON log lines written so far.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// requestLines are the access-log lines.
func (s *syncBuffer) requestLines(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, l := range s.lines(t) {
		if l["msg"] == "request" {
			out = append(out, l)
		}
	}
	return out
}

// observedEnv is newEnv with metrics (the store reporting its scripts too) and a
// JSON logger that serves as both the server's log and the access log, as in
// `serve`; lim, when set, rate-limits.
func observedEnv(t *testing.T, lim httpapi.RateLimiter) (*env, *metrics.Metrics, *syncBuffer) {
	t.Helper()
	e := newEnv(t, nil)
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(e.rdb, store.Options{Now: e.clock.Now, Retention: time.Hour, OpTimeout: 5 * time.Second,
		EarlyTolerance: 0.2, ScriptObserver: m})
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(buf, nil))
	e.st = st
	e.srv = e.compose(st, time.Second, lim, app.Options{Log: log,
		HTTP: httpapi.Options{BodyLimitBytes: 64 << 10, Metrics: m, AccessLog: httpapi.NewAccessLog(buf, nil)}})
	return e, m, buf
}

func scrapeMetrics(t *testing.T, e *env) string {
	t.Helper()
	r := e.call("GET", "/metrics", "")
	if r.code != 200 || !strings.HasPrefix(r.h.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %q", r.code, r.h.Get("Content-Type"))
	}
	return string(r.body)
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l+"\n") {
			t.Errorf("metrics lack %s", l)
		}
	}
}

var uuidLike = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func TestMetrics(t *testing.T) {
	e, _, _ := observedEnv(t, nil)
	id, tok := e.mustCreate("acme-rw")
	e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...)
	e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...) // early: 429
	e.call("GET", "/v1/requests/"+id, "", "X-Poll-Token", tok)
	e.call("POST", "/v1/requests/"+id+"/processing", "", e.as("acme-w")...)
	e.call("POST", "/v1/requests/"+id+"/complete", `{"result_type":"answer","result":{}}`, e.as("acme-w")...)
	e.call("POST", "/v1/requests/"+id+"/complete", `{"result_type":"answer","result":{}}`, e.as("acme-w")...) // 409
	e.call("GET", "/v1/requests/"+uuidLike.FindString(id), "", e.as("acme-r")...)
	e.call("GET", "/nope/"+id, "")
	e.call("PUT", "/v1/requests/"+id, "")
	e.call("GET", "/", "")
	out := scrapeMetrics(t, e)
	wantLines(t, out,
		`asyncstatus_http_requests_total{class="2xx",method="GET",route="/"} 1`,
		`asyncstatus_http_requests_total{class="2xx",method="POST",route="/v1/requests"} 1`,
		`asyncstatus_http_requests_total{class="2xx",method="GET",route="/v1/requests/:id"} 3`,
		`asyncstatus_http_requests_total{class="4xx",method="GET",route="/v1/requests/:id"} 1`,
		`asyncstatus_http_requests_total{class="4xx",method="POST",route="/v1/requests/:id/complete"} 1`,
		`asyncstatus_http_requests_total{class="4xx",method="GET",route="unmatched"} 1`,
		`asyncstatus_http_requests_total{class="4xx",method="PUT",route="unmatched"} 1`,
		`asyncstatus_http_request_duration_seconds_count{class="2xx",method="GET",route="/v1/requests/:id"} 3`,
		`asyncstatus_transitions_total{to="queued",transition="create"} 1`,
		`asyncstatus_transitions_total{to="processing",transition="processing"} 1`,
		`asyncstatus_transitions_total{to="succeeded",transition="complete"} 1`,
		`asyncstatus_transitions_total{to="failed",transition="fail"} 0`,
		`asyncstatus_http_throttled_total{reason="polled_too_early"} 1`,
		`asyncstatus_http_throttled_total{reason="rate_limited"} 0`,
		`asyncstatus_http_backend_unavailable_total 0`,
		`asyncstatus_redis_script_duration_seconds_count{result="ok",script="create"} 1`,
		`asyncstatus_redis_script_duration_seconds_count{result="ok",script="poll"} 4`,
		`asyncstatus_redis_script_duration_seconds_count{result="ok",script="transition"} 3`,
	)
	// bounded labels: no request id, tenant, key or raw path in any series
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if uuidLike.MatchString(line) || strings.Contains(line, "acme") || strings.Contains(line, "key_") || strings.Contains(line, "/nope") {
			t.Errorf("unbounded label in %s", line)
		}
	}
	// the scrape itself is counted, without a credential
	if !strings.Contains(scrapeMetrics(t, e), `asyncstatus_http_requests_total{class="2xx",method="GET",route="/metrics"} 1`) {
		t.Error("/metrics is not counted under its own route")
	}
}

func TestMetricsRefusals(t *testing.T) {
	e, _, _ := observedEnv(t, &fakeLimiter{left: 1})
	id, _ := e.mustCreate("acme-rw")
	wantProblem(t, e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...), 429, "RATE_LIMITED")
	wantLines(t, scrapeMetrics(t, e), `asyncstatus_http_throttled_total{reason="rate_limited"} 1`,
		`asyncstatus_http_throttled_total{reason="polled_too_early"} 0`)

	// Redis refusing connections
	m, _ := metrics.New(prometheus.NewRegistry())
	st, _ := store.New(deadRedis(t), store.Options{OpTimeout: 200 * time.Millisecond, ScriptObserver: m})
	e.srv = httpapi.New(st, fixedAuth{}, nil, httpapi.Options{Metrics: m}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	wantProblem(t, e.call("GET", "/v1/requests/"+id, "", "Authorization", "Bearer x"), 503, "BACKEND_UNAVAILABLE")
	wantProblem(t, e.call("GET", "/readyz", ""), 503, "BACKEND_UNAVAILABLE")
	wantLines(t, scrapeMetrics(t, e), `asyncstatus_http_backend_unavailable_total 2`,
		`asyncstatus_redis_script_duration_seconds_count{result="error",script="poll"} 1`,
		`asyncstatus_http_requests_total{class="5xx",method="GET",route="/v1/requests/:id"} 1`)
}

// deadRedis is a client of an address nothing listens on.
func deadRedis(t *testing.T) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// fixedAuth accepts any bearer key as acme's reader.
type fixedAuth struct{}

func (fixedAuth) APIKeyFrom(context.Context, string, netip.Addr) (domain.Principal, error) {
	return domain.Principal{Tenant: "acme", KeyID: "key_fixed", Scopes: domain.ScopeRead | domain.ScopeWrite | domain.ScopeAdmin}, nil
}
func (fixedAuth) PollTokenPrincipal(string, string) (domain.Principal, error) {
	return domain.Principal{}, domain.ErrNotFound()
}
func (fixedAuth) PollToken(string, string) string { return "t" }

func TestAccessLog(t *testing.T) {
	e, _, buf := observedEnv(t, nil)
	r := e.create("acme-rw", `{"type":"x","context":{"secret_note":"do-not-log-me"}}`, "X-Request-Id", "trace-42")
	if r.code != 202 || r.h.Get("X-Request-Id") != "trace-42" {
		t.Fatalf("create: %d %q", r.code, r.h.Get("X-Request-Id"))
	}
	id, tok := r.json(t)["id"].(string), r.json(t)["poll_token"].(string)
	p := e.call("GET", "/v1/requests/"+id, "", "X-Poll-Token", tok)
	early := e.call("GET", "/v1/requests/"+id, "", "X-Poll-Token", tok)
	e.call("GET", "/v1/requests/"+id, "", "Authorization", "Bearer ask_not-a-real-key")
	e.call("GET", "/nope", "")

	lines := buf.requestLines(t)
	if len(lines) != 5 {
		t.Fatalf("%d request lines for 5 requests:\n%s", len(lines), buf)
	}
	want := []struct {
		route           string
		status          float64
		requestID       string
		tenant, keyID   string
		code            string
		method          string
		requestIDHeader string
	}{
		{"/v1/requests", 202, "trace-42", "acme", "key_", "", "POST", ""},
		{"/v1/requests/:id", 200, p.h.Get("X-Request-Id"), "acme", "poll_token", "", "GET", ""},
		{"/v1/requests/:id", 429, early.h.Get("X-Request-Id"), "acme", "poll_token", "POLLED_TOO_EARLY", "GET", ""},
		{"/v1/requests/:id", 401, "", "", "", "UNAUTHENTICATED", "GET", ""},
		{"unmatched", 404, "", "", "", "NOT_FOUND", "GET", ""},
	}
	for i, w := range want {
		l := lines[i]
		if l["route"] != w.route || l["status"] != w.status || l["method"] != w.method || l["tenant"] != w.tenant ||
			!strings.HasPrefix(l["key_id"].(string), w.keyID) || (w.keyID == "" && l["key_id"] != "") {
			t.Errorf("line %d: %v, want %+v", i, l, w)
		}
		if w.requestID != "" && l["request_id"] != w.requestID {
			t.Errorf("line %d: request_id %v, want %s", i, l["request_id"], w.requestID)
		}
		if rid, _ := l["request_id"].(string); len(rid) < 8 {
			t.Errorf("line %d: request_id %q", i, rid)
		}
		if code, _ := l["code"].(string); code != w.code {
			t.Errorf("line %d: code %q, want %q", i, code, w.code)
		}
		if d, ok := l["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("line %d: duration_ms %v", i, l["duration_ms"])
		}
		if l["level"] != "INFO" {
			t.Errorf("line %d: level %v", i, l["level"])
		}
	}
	// never a secret, token, header or body
	all := buf.String()
	for _, secret := range append(append([]string{}, e.plain...), tok, "do-not-log-me", "ask_not-a-real-key", id) {
		if strings.Contains(all, secret) {
			t.Errorf("the log holds %q:\n%s", secret, all)
		}
	}
}

// TestAccessLogNoDoubleErrors: an error answer is one access line; the error
// handler's own line stays for the errors it logs (503 and internal errors),
// and the observe middleware adds no second handling of the error.
func TestAccessLogNoDoubleErrors(t *testing.T) {
	e, _, buf := observedEnv(t, nil)
	st, _ := store.New(deadRedis(t), store.Options{OpTimeout: 200 * time.Millisecond})
	log := slog.New(slog.NewJSONHandler(buf, nil))
	e.srv = httpapi.New(st, fixedAuth{}, nil, httpapi.Options{AccessLog: log}, log)
	r := e.call("GET", "/readyz", "")
	wantProblem(t, r, 503, "BACKEND_UNAVAILABLE")
	lines := buf.lines(t)
	if len(lines) != 2 || lines[0]["msg"] != "backend unavailable" || lines[1]["msg"] != "request" || lines[1]["status"] != float64(503) {
		t.Fatalf("want the error handler's line then one access line, got:\n%s", buf)
	}
	if lines[0]["request_id"] != lines[1]["request_id"] || lines[1]["request_id"] != r.h.Get("X-Request-Id") {
		t.Fatalf("request ids differ: %v %v %q", lines[0]["request_id"], lines[1]["request_id"], r.h.Get("X-Request-Id"))
	}
}

// TestObserveOff: without metrics and access log the middleware is not installed
// and /metrics still answers (empty).
func TestObserveOff(t *testing.T) {
	e := newEnv(t, nil)
	r := e.call("GET", "/metrics", "")
	if r.code != 200 || strings.Contains(string(r.body), "asyncstatus_") {
		t.Fatalf("/metrics without metrics: %d %s", r.code, r.body)
	}
	wantProblem(t, e.call("GET", "/nope", ""), 404, "NOT_FOUND")
}

// ---- benchmarks: the cost of metrics and the access log on the poll path ----

// memKeys is an in-memory auth.KeyStore.
type memKeys struct{ m map[string]domain.APIKey }

func (k memKeys) LookupKey(_ context.Context, id string) (domain.APIKey, error) {
	if v, ok := k.m[id]; ok {
		return v, nil
	}
	return domain.APIKey{}, domain.ErrNotFound()
}
func (k memKeys) SaveKey(_ context.Context, v domain.APIKey) error { k.m[v.ID] = v; return nil }

// stubRequests answers every poll with one queued request, without Redis: what
// is left is the HTTP path alone.
type stubRequests struct {
	httpapi.Requests
	r domain.Request
}

func (s stubRequests) Poll(context.Context, domain.PollParams) (domain.PollResult, error) {
	r := s.r
	return domain.PollResult{Request: &r, RetryAfter: 2}, nil
}

// observation is what a benchmark server observes.
type observation struct {
	name         string
	metrics, log bool
}

var observations = []observation{{"plain", false, false}, {"metrics", true, false}, {"metrics+log", true, true}}

// benchServer builds a server over reqs with the metrics and a JSON access log
// (NewAccessLog on io.Discard: formatting is paid, the write is not) as ob says.
func benchServer(b *testing.B, reqs httpapi.Requests, keys auth.KeyStore, now func() time.Time, ob observation, m *metrics.Metrics) (*httpapi.Server, string) {
	b.Helper()
	plain, k, err := auth.NewKey("acme", domain.ScopeRead|domain.ScopeWrite, "bench", now())
	if err != nil {
		b.Fatal(err)
	}
	if err := keys.SaveKey(context.Background(), k); err != nil {
		b.Fatal(err)
	}
	o := httpapi.Options{}
	if ob.metrics {
		o.Metrics = m
	}
	if ob.log {
		o.AccessLog = httpapi.NewAccessLog(io.Discard, nil) // as serve makes it for log.format json
	}
	// A long key cache: the poll path of a busy client, one Redis call per poll.
	a := auth.New(keys, []byte("0123456789abcdef0123456789abcdef"), 1000*time.Hour, now)
	return httpapi.New(reqs, a, nil, o, slog.New(slog.NewTextHandler(io.Discard, nil))), plain
}

// benchPolls polls one request b.N times, the clock moving past each Retry-After.
// It calls the server's fasthttp handler on one goroutine with one reused
// RequestCtx, as a fasthttp worker does: app.Test would start a goroutine per
// request and charge its stack growth to whichever variant has deeper frames.
func benchPolls(b *testing.B, srv *httpapi.Server, key, id string, clk *clock) {
	b.Helper()
	h := srv.App().Handler()
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI("/v1/requests/" + id)
	req.Header.Set("Authorization", "Bearer "+key)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := testenv.ProcessCPU()
	for range b.N {
		if clk != nil {
			clk.Add(31 * time.Second) // past the last step of the schedule: never early
		}
		ctx.ResetUserValues() // as a fasthttp server does: a fresh request id, no stale Locals
		ctx.Response.Reset()
		h(&ctx)
		if code := ctx.Response.StatusCode(); code != 200 {
			b.Fatalf("poll answered %d: %s", code, ctx.Response.Body())
		}
	}
	// CPU of the whole process (GC and the Redis client's goroutines included,
	// redis-server excluded) per poll.
	b.ReportMetric(float64(testenv.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

func benchStore(b *testing.B, rdb redis.UniversalClient, ob observation) {
	clk := testenv.NewClock(time.Now().UTC())
	o := store.Options{Now: clk.Now, Prefix: testenv.Isolate(b), QueuedTimeout: 1000 * time.Hour}
	m, _ := metrics.New(prometheus.NewRegistry())
	if ob.metrics {
		o.ScriptObserver = m
	}
	st, err := store.New(rdb, o)
	if err != nil {
		b.Fatal(err)
	}
	srv, key := benchServer(b, st, st, clk.Now, ob, m)
	r, _, err := st.Create(context.Background(), domain.CreateParams{
		Call:  domain.Call{Tenant: "acme", By: "key_bench"},
		Input: domain.CreateInput{Type: "statement.export", Context: []byte(`{"account":"acc_881204"}`)},
	})
	if err != nil {
		b.Fatal(err)
	}
	benchPolls(b, srv, key, r.ID, clk)
}

// BenchmarkPoll measures GET /v1/requests/{id} by API key (cached), plain, with
// metrics (request metrics and the script observer), and with metrics and the
// JSON access log:
//
//	stub:      no Redis, the HTTP path alone (the worst case for the ratio)
//	miniredis: the embedded store
//	redis:     a real redis-server over loopback (skipped without redis-server)
func BenchmarkPoll(b *testing.B) {
	for _, ob := range observations {
		b.Run("stub/"+ob.name, func(b *testing.B) {
			now := time.Now().UTC()
			reqs := stubRequests{r: domain.Request{ID: unknownID, Type: "statement.export", Status: domain.StatusQueued,
				CreatedBy: "key_bench", CreatedAt: domain.Time{Time: now}, UpdatedAt: domain.Time{Time: now}, Version: 1}}
			m, _ := metrics.New(prometheus.NewRegistry())
			srv, key := benchServer(b, reqs, memKeys{m: map[string]domain.APIKey{}}, func() time.Time { return now }, ob, m)
			benchPolls(b, srv, key, unknownID, nil)
		})
	}
	for _, ob := range observations {
		b.Run("miniredis/"+ob.name, func(b *testing.B) {
			m := testenv.Miniredis(b)
			rdb := redis.NewClient(&redis.Options{Dialer: memconn.Dialer(m.Dial), DisableIdentity: true})
			defer rdb.Close()
			benchStore(b, rdb, ob)
		})
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		b.Logf("no redis-server: skipping the redis benchmarks")
		return
	}
	proc := testenv.StartRedisProcess(b) // stopped when BenchmarkPoll ends
	for _, ob := range observations {
		b.Run("redis/"+ob.name, func(b *testing.B) {
			rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), DisableIdentity: true})
			defer rdb.Close()
			benchStore(b, rdb, ob)
		})
	}
}
