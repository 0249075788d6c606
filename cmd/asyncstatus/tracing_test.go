package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/asyncstatus/asyncstatus/internal/buildinfo"
	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
	"github.com/asyncstatus/asyncstatus/internal/tracing/otlptest"
)

// tracingBackends are serve's environments on the three backends, with an
// API key of tenant acme made by `keys create` (the embedded store prints its
// demo key instead: key "").
func tracingBackends(t *testing.T) []struct {
	name string
	env  func(t *testing.T) (map[string]string, string)
} {
	withKey := func(t *testing.T, env map[string]string) (map[string]string, string) {
		t.Helper()
		out, errOut, err := runCmd(t, env, "keys", "create", "--tenant", "acme", "--scopes", "read,write,admin", "--name", "trace")
		if err != nil {
			t.Fatalf("keys create: %v %s", err, errOut)
		}
		return env, strings.TrimSpace(out)
	}
	base := func(t *testing.T) map[string]string {
		return map[string]string{
			"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": strings.Repeat("s", 32),
			"ASYNCSTATUS_WEBHOOKS_SECRET_KEY":    strings.Repeat("w", 32),
			"ASYNCSTATUS_REDIS_KEY_PREFIX":       testenv.Isolate(t),
		}
	}
	return []struct {
		name string
		env  func(t *testing.T) (map[string]string, string)
	}{
		{"embedded", func(t *testing.T) (map[string]string, string) { return base(t), "" }},
		{"redis", func(t *testing.T) (map[string]string, string) {
			env := base(t)
			env["ASYNCSTATUS_REDIS_URL"] = "redis://" + testenv.Redis(t) + "/0"
			return withKey(t, env)
		}},
		{"cluster", func(t *testing.T) (map[string]string, string) {
			env := base(t)
			env["ASYNCSTATUS_REDIS_CLUSTER_ADDRS"] = strings.Join(testenv.Cluster(t), ",")
			return withKey(t, env)
		}},
	}
}

// hookReceiver is a webhook endpoint that keeps the traceparent of every
// delivery, by message id.
type hookReceiver struct {
	mu   sync.Mutex
	seen map[string]string
	got  chan string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get("webhook-id")
	h.mu.Lock()
	h.seen[id] = r.Header.Get("traceparent")
	h.mu.Unlock()
	select {
	case h.got <- id:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// TestTracingOneExport follows one export through serve with tracing on, on
// every backend: a create made with a traceparent (trace C), processing and
// complete made by a worker in its own trace (W), the webhook delivery of
// request.succeeded, and a second request failed by the sweeper's processing
// timeout. The OTLP/HTTP receiver in the test gets every span (serve's stop
// flushes them) and the test checks the structure reference §17 promises and
// that no span carries a key, a token, a context or a result.
func TestTracingOneExport(t *testing.T) {
	for _, b := range tracingBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			env, key := b.env(t)
			rcv := otlptest.Start(t)
			hooks := &hookReceiver{seen: map[string]string{}, got: make(chan string, 16)}
			hookSrv := newLocalServer(t, hooks)
			env["ASYNCSTATUS_TRACING_OTLP_ENDPOINT"] = rcv.URL
			env["ASYNCSTATUS_TRACING_SERVICE_NAME"] = "asyncstatus-test"
			env["ASYNCSTATUS_WEBHOOKS_ALLOW_HTTP"] = "true"
			env["ASYNCSTATUS_WEBHOOKS_ALLOW_PRIVATE"] = "true"
			env["ASYNCSTATUS_LIFECYCLE_PROCESSING_TIMEOUT"] = "1s"
			env["ASYNCSTATUS_LIFECYCLE_SWEEP_INTERVAL"] = "200ms"
			env["ASYNCSTATUS_RATELIMIT_ENABLED"] = "false"
			base, out, stop := serving(t, env)
			if key == "" {
				m := keyLine.FindStringSubmatch(out.String())
				if m == nil {
					t.Fatalf("no demo key printed:\n%s", out.String())
				}
				key = m[1]
			}

			const (
				createTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
				createParent = "00f067aa0ba902b7"
				workerTrace  = "0af7651916cd43dd8448eb211c80319c"
				workerParent = "b7ad6b7169203331"
				secretCtx    = "ctx-SECRET-acc-991"
				secretResult = "result-SECRET-4411"
			)
			send := func(method, url, cred, body, traceparent string) (int, map[string]any) {
				t.Helper()
				req, _ := http.NewRequest(method, url, strings.NewReader(body))
				if strings.HasPrefix(cred, "ask_") {
					req.Header.Set("Authorization", "Bearer "+cred)
				} else {
					req.Header.Set("X-Poll-Token", cred)
				}
				if body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				if traceparent != "" {
					req.Header.Set("traceparent", traceparent)
					req.Header.Set("tracestate", "vendor=abc")
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				raw, _ := io.ReadAll(res.Body)
				if strings.Contains(string(raw), createTrace) || strings.Contains(string(raw), "traceparent") {
					t.Errorf("%s %s: the answer shows the kept trace context: %s", method, url, raw) // §17: not in the representation
				}
				m := map[string]any{}
				_ = jsonUnmarshal(raw, &m)
				return res.StatusCode, m
			}
			if code, r := send("POST", base+"/v1/webhooks", key, `{"url":"`+hookSrv+`/hook","events":["request.succeeded"]}`, ""); code != 201 {
				t.Fatalf("register webhook: %d %v", code, r)
			}
			code, created := send("POST", base+"/v1/requests?note=query-SECRET", key,
				`{"type":"statement.export","context":{"account":"`+secretCtx+`"}}`, "00-"+createTrace+"-"+createParent+"-01")
			if code != 202 {
				t.Fatalf("create: %d %v", code, created)
			}
			id, token := created["id"].(string), created["poll_token"].(string)
			worker := "00-" + workerTrace + "-" + workerParent + "-01"
			if code, r := send("POST", base+"/v1/requests/"+id+"/processing", key, `{"percent":10}`, worker); code != 200 {
				t.Fatalf("processing: %d %v", code, r)
			}
			if code, r := send("GET", base+"/v1/requests/"+id, token, "", ""); code != 200 {
				t.Fatalf("poll: %d %v", code, r)
			}
			if code, r := send("POST", base+"/v1/requests/"+id+"/complete", key,
				`{"result_type":"answer","result":{"v":"`+secretResult+`"}}`, worker); code != 200 {
				t.Fatalf("complete: %d %v", code, r)
			}
			msg := "msg_" + id + "_s"
			for deadline := time.After(20 * time.Second); ; {
				var got string
				select {
				case got = <-hooks.got:
				case <-deadline:
					t.Fatal("the webhook was not delivered")
				}
				if got == msg {
					break
				}
			}
			// A second request, timed out by the sweeper while processing.
			code, late := send("POST", base+"/v1/requests", key, `{"type":"statement.export"}`, "00-"+createTrace+"-"+createParent+"-01")
			if code != 202 {
				t.Fatalf("create: %d %v", code, late)
			}
			lateID := late["id"].(string)
			if code, r := send("POST", base+"/v1/requests/"+lateID+"/processing", key, `{}`, ""); code != 200 {
				t.Fatalf("processing: %d %v", code, r)
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				_, r := send("GET", base+"/v1/requests/"+lateID, key, "", "")
				if r["status"] == "failed" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the sweeper did not time out %s: %v", lateID, r)
				}
			}
			if err := stop(); err != nil { // flushes the spans
				t.Fatal(err)
			}
			if bad := rcv.Bad(); len(bad) > 0 {
				t.Fatalf("the receiver could not read: %v", bad)
			}
			spans := rcv.Spans()
			byID := map[string]otlptest.Span{}
			for _, s := range spans {
				byID[s.SpanID()] = s
			}
			find := func(name, trace string, attrs map[string]string) otlptest.Span {
				t.Helper()
				for _, s := range spans {
					if s.GetName() != name || (trace != "" && s.TraceID() != trace) {
						continue
					}
					ok := true
					for k, v := range attrs {
						if got, _ := s.Attr(k); got != v {
							ok = false
						}
					}
					if ok {
						return s
					}
				}
				var names []string
				for _, s := range spans {
					names = append(names, s.GetName()+"@"+s.TraceID()[:6])
				}
				t.Fatalf("no span %q in trace %s with %v among %v", name, trace, attrs, names)
				return otlptest.Span{}
			}
			wantAttrs := func(s otlptest.Span, want map[string]string) {
				t.Helper()
				for k, v := range want {
					if got, ok := s.Attr(k); !ok || got != v {
						t.Errorf("span %s: %s = %q, want %q", s.GetName(), k, got, v)
					}
				}
			}
			linksTo := func(s otlptest.Span, trace, span string) bool {
				for _, l := range s.GetLinks() {
					if fmt.Sprintf("%x", l.GetTraceId()) == trace && fmt.Sprintf("%x", l.GetSpanId()) == span {
						return true
					}
				}
				return false
			}

			// The create: the caller's child, and the parent of its script call.
			create := find("POST /v1/requests", createTrace, map[string]string{"http.response.status_code": "202"})
			if create.ParentID() != createParent || create.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("create span: parent %s kind %v, want %s server", create.ParentID(), create.GetKind(), createParent)
			}
			wantAttrs(create, map[string]string{"http.request.method": "POST", "http.route": "/v1/requests", "url.scheme": "http"})
			if ts := create.GetTraceState(); ts != "vendor=abc" {
				t.Errorf("create span tracestate %q, want the caller's", ts)
			}
			if v, _ := (otlptest.Span{Span: &tracepb.Span{Attributes: create.Resource}}).Attr("service.name"); v != "asyncstatus-test" {
				t.Errorf("service.name %q", v)
			}
			script := find("EVALSHA create", createTrace, nil)
			if script.ParentID() != create.SpanID() || script.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("create's script span: parent %s, want %s", script.ParentID(), create.SpanID())
			}
			wantAttrs(script, map[string]string{"db.system.name": "redis", "db.stored_procedure.name": "create", "db.operation.name": "EVALSHA"})

			// The worker's calls: in its own trace, linked to the create.
			for _, route := range []string{"/v1/requests/:id/processing", "/v1/requests/:id/complete"} {
				s := find("POST "+route, workerTrace, nil)
				if s.ParentID() != workerParent || !linksTo(s, createTrace, create.SpanID()) {
					t.Errorf("%s: parent %s links %v, want parent %s and a link to the create", route, s.ParentID(), s.GetLinks(), workerParent)
				}
				wantAttrs(s, map[string]string{"http.route": route, "http.response.status_code": "200"})
				tr := find("EVALSHA transition", workerTrace, nil)
				if byID[tr.ParentID()].GetName() != "POST /v1/requests/:id/processing" && byID[tr.ParentID()].GetName() != "POST /v1/requests/:id/complete" {
					t.Errorf("transition script span's parent is %q", byID[tr.ParentID()].GetName())
				}
			}
			// A call without traceparent is a root span of its own trace.
			poll := find("GET /v1/requests/:id", "", map[string]string{"http.response.status_code": "200"})
			if poll.ParentID() != "" && byID[poll.ParentID()].Span == nil && poll.TraceID() == createTrace {
				t.Errorf("poll span joined the create's trace")
			}

			// The delivery: in the create's trace, its child, linked to it, and
			// its traceparent is what the receiver got.
			hook := find("webhook request.succeeded", createTrace, nil)
			if hook.ParentID() != create.SpanID() || !linksTo(hook, createTrace, create.SpanID()) || hook.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("webhook span: parent %s links %v, want the create %s", hook.ParentID(), hook.GetLinks(), create.SpanID())
			}
			wantAttrs(hook, map[string]string{"asyncstatus.request.id": id, "asyncstatus.webhook.event": "request.succeeded",
				"asyncstatus.webhook.attempt": "1", "http.response.status_code": "204", "server.address": "127.0.0.1"})
			hooks.mu.Lock()
			sent := hooks.seen[msg]
			hooks.mu.Unlock()
			if want := "00-" + createTrace + "-" + hook.SpanID() + "-01"; sent != want {
				t.Errorf("delivery sent traceparent %q, want %q", sent, want)
			}

			// The sweeper's timeout: a root span linked to that create.
			var creates []otlptest.Span
			for _, s := range spans {
				if s.GetName() == "POST /v1/requests" && s.TraceID() == createTrace {
					creates = append(creates, s)
				}
			}
			sweep := find("sweeper timeout", "", map[string]string{"asyncstatus.request.id": lateID, "asyncstatus.request.to": "failed"})
			if sweep.ParentID() != "" || len(creates) != 2 || !linksTo(sweep, createTrace, creates[1].SpanID()) {
				t.Errorf("sweeper span: parent %q links %v, want a root linked to the second create", sweep.ParentID(), sweep.GetLinks())
			}
			if byID[sweep.SpanID()].GetName() == "" {
				t.Error("sweeper span missing")
			}
			var sweepScript bool
			for _, s := range spans {
				if s.ParentID() == sweep.SpanID() && s.GetName() == "EVALSHA transition" {
					sweepScript = true
				}
			}
			if !sweepScript {
				t.Error("the sweeper's transition has no script span")
			}

			// The probes serve polled at start make no span.
			for _, s := range spans {
				if r, _ := s.Attr("http.route"); r == "/healthz" || r == "/readyz" || r == "/metrics" {
					t.Errorf("a span of %s", r)
				}
			}

			// Nothing secret anywhere.
			secrets := []string{key, token, secretCtx, secretResult, "query-SECRET", "note=", id + "/", "Bearer"}
			if i := strings.LastIndexByte(key, '_'); i > 0 {
				secrets = append(secrets, key[i+1:]) // the key's secret part
			}
			idInPath := regexp.MustCompile(`/v1/requests/[0-9a-f]{8}-`)
			for _, s := range spans {
				for _, v := range s.AllValues() {
					for _, sec := range secrets {
						if sec != "" && strings.Contains(v, sec) {
							t.Errorf("span %s carries %q: %s", s.GetName(), sec, v)
						}
					}
					if idInPath.MatchString(v) {
						t.Errorf("span %s carries a path, not a route: %s", s.GetName(), v)
					}
				}
			}
		})
	}
}

// TestTracingCollectorAway: a collector that refuses connections and one
// that never answers leave every answer as it is, and the spans they did
// not take are counted on /metrics.
func TestTracingCollectorAway(t *testing.T) {
	hang := make(chan struct{})
	hanging := newLocalServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang) }) // before the server's Close, which waits for its handlers
	for _, c := range []struct{ name, endpoint string }{
		{"unreachable", fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))},
		{"hanging", hanging},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, out, stop := serving(t, map[string]string{"ASYNCSTATUS_TRACING_OTLP_ENDPOINT": c.endpoint})
			m := keyLine.FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no demo key printed:\n%s", out.String())
			}
			key := m[1]
			for i := 0; i < 20; i++ {
				code, created, _ := do(t, "POST", base+"/v1/requests", key, `{"type":"x.y"}`)
				if code != 202 {
					t.Fatalf("create %d: %d %v", i, code, created)
				}
				u := base + "/v1/requests/" + created["id"].(string)
				if code, r, _ := do(t, "GET", u, key, ""); code != 200 {
					t.Fatalf("poll: %d %v", code, r)
				}
				if code, r, _ := do(t, "POST", u+"/complete", key, `{"result_type":"answer","result":{}}`); code != 200 {
					t.Fatalf("complete: %d %v", code, r)
				}
			}
			// The spans wait for a batch (2s), then the export fails at once
			// (unreachable) or after its 5s timeout (hanging): wait for the count.
			dropped := regexp.MustCompile(`(?m)^asyncstatus_tracing_spans_dropped_total ([0-9.e+]+)$`)
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				res, err := http.Get(base + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if mm := dropped.FindSubmatch(body); mm != nil {
					if n, _ := strconv.ParseFloat(string(mm[1]), 64); n >= 60 { // 20 x (create, poll, complete) server spans at least
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("drops not counted:\n%s", grepLines(string(body), "tracing"))
				}
			}
			if code, _, _ := do(t, "GET", base+"/readyz", "", ""); code != 200 {
				t.Fatalf("readyz %d", code)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// newLocalServer serves h on loopback until the test ends; its base URL.
func newLocalServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestTracingOff: with no endpoint nothing of tracing runs: no tracer is
// handed to any part, a call's traceparent goes nowhere, webhook deliveries
// carry none, and /metrics has no tracing series.
func TestTracingOff(t *testing.T) {
	tr, stop, err := startTracing(config.Defaults(), buildinfo.Info{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil || tr.store != nil || tr.webhook != nil || tr.http != nil {
		t.Fatalf("tracing off made %+v, %v", tr, err)
	}
	stop()
	hooks := &hookReceiver{seen: map[string]string{}, got: make(chan string, 16)}
	hookSrv := newLocalServer(t, hooks)
	base, out, _ := serving(t, map[string]string{"ASYNCSTATUS_WEBHOOKS_ALLOW_HTTP": "true", "ASYNCSTATUS_WEBHOOKS_ALLOW_PRIVATE": "true",
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY": strings.Repeat("w", 32)})
	m := keyLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no demo key printed:\n%s", out.String())
	}
	key := m[1]
	if code, r, _ := do(t, "POST", base+"/v1/webhooks", key, `{"url":"`+hookSrv+`/hook","events":["request.created"]}`); code != 201 {
		t.Fatalf("register: %d %v", code, r)
	}
	req, _ := http.NewRequest("POST", base+"/v1/requests", strings.NewReader(`{"type":"x.y"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 202 {
		t.Fatalf("create: %v %v", err, res)
	}
	res.Body.Close()
	select {
	case id := <-hooks.got:
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		if tp := hooks.seen[id]; tp != "" {
			t.Errorf("a delivery with tracing off sent traceparent %q", tp)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the webhook was not delivered")
	}
	res, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if strings.Contains(string(body), "asyncstatus_tracing_") {
		t.Errorf("tracing series with tracing off:\n%s", grepLines(string(body), "tracing"))
	}
}
