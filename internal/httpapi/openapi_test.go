package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// contract checks exchanges against the OpenAPI document and remembers which
// answers of which operation it has seen.
type contract struct {
	doc    *openapi3.T
	router routers.Router
	seen   map[string]map[int]bool // operationId -> statuses
}

func loadContract(t *testing.T) *contract {
	t.Helper()
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(httpapi.OpenAPI())
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.json is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	// An event stream's body is text; its events are checked by the test.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &contract{doc: doc, router: r, seen: map[string]map[int]bool{}}
}

// presentCredential stands in for the real check: the document only says which
// header carries which credential; the server decides whether it is valid.
func presentCredential(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	h := in.RequestValidationInput.Request.Header
	switch in.SecuritySchemeName {
	case "bearerAuth":
		if v := h.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "Bearer ") {
			return nil
		}
	case "pollToken":
		if h.Get("X-Poll-Token") != "" {
			return nil
		}
	case "pollTokenQuery":
		if in.RequestValidationInput.Request.URL.Query().Get("poll_token") != "" {
			return nil
		}
	}
	return in.NewError(nil)
}

// exchange is one request the contract test sends.
type exchange struct {
	name               string
	method, path, body string
	hdr                []string // alternating names and values
	want               int
	code               string // the problem code wanted, for error answers
	// invalid: the document itself must refuse the request (the server refuses it too).
	invalid bool
	// network sends it through a real listener (fasthttp's body limit).
	network bool
}

// check sends x to e's server, validating the request and the answer against
// the document.
func (k *contract) check(t *testing.T, e *env, x exchange) resp {
	t.Helper()
	var vreq *http.Request
	if x.body != "" {
		vreq = httptest.NewRequest(x.method, x.path, strings.NewReader(x.body))
		vreq.Header.Set("Content-Type", "application/json")
	} else {
		vreq = httptest.NewRequest(x.method, x.path, nil)
	}
	for i := 0; i+1 < len(x.hdr); i += 2 {
		vreq.Header.Set(x.hdr[i], x.hdr[i+1])
	}
	route, params, err := k.router.FindRoute(vreq)
	if err != nil {
		t.Fatalf("%s: %s %s is not in openapi.json: %v", x.name, x.method, x.path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: presentCredential, MultiError: true}}
	err = openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case x.invalid && err == nil:
		t.Errorf("%s: openapi.json accepts a request the server must refuse", x.name)
	case !x.invalid && err != nil:
		t.Errorf("%s: openapi.json refuses the request: %v", x.name, err)
	}

	var r resp
	if x.network {
		r = e.overNetwork(x.method, x.path, x.body, x.hdr...)
	} else {
		r = e.call(x.method, x.path, x.body, x.hdr...)
	}
	if r.code != x.want {
		t.Fatalf("%s: %s %s answered %d, want %d: %s", x.name, x.method, x.path, r.code, x.want, r.body)
	}
	if x.code != "" && googleRoute(x.path) {
		wantGoogleError(t, r, x.want, x.code)
	} else if x.code != "" {
		wantProblem(t, r, x.want, x.code)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.code, Header: r.h,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(r.body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s: %s %s answer %d does not match openapi.json: %v\n%s", x.name, x.method, x.path, r.code, err, r.body)
	}
	op := route.Operation.OperationID
	if k.seen[op] == nil {
		k.seen[op] = map[int]bool{}
	}
	k.seen[op][r.code] = true
	return r
}

// observed is an env whose server has metrics, an access log and the webhook
// routes, so that the contract also covers answers that pass through the
// observe middleware and every /v1/webhooks operation.
func observed(t *testing.T) *env {
	return newAppEnv(t, func(o *app.Options) {
		m, err := metrics.New(prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		o.HTTP.Metrics = m
		o.HTTP.AccessLog = slog.New(slog.NewJSONHandler(io.Discard, nil))
		o.HTTP.Wait = httpapi.WaitOptions{Max: 30 * time.Second, MaxWaiters: 100, Heartbeat: 100 * time.Millisecond,
			StreamMax: time.Second, ReadTimeout: 2 * time.Second}
		contractParts(t, o)
	})
}

// contractParts adds the notification hub and the webhooks to o: the routes,
// and a dispatcher delivering the messages on the real clock (its registry
// walks are paced by it); the first retry is an hour away, so a failed
// attempt stays "retrying".
func contractParts(t *testing.T, o *app.Options) {
	o.Waits = &store.HubOptions{}
	o.Webhooks = &webhook.DispatcherOptions{Timeout: 2 * time.Second, RetrySchedule: []time.Duration{time.Hour},
		Guard: contractGuard, Sealer: contractSealer(t), PollInterval: 20 * time.Millisecond,
		RegistryInterval: 20 * time.Millisecond, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
}

// contractGuard allows http and private addresses (webhooks.allow_http and
// webhooks.allow_private): the contract test's receivers are httptest servers
// on loopback.
var contractGuard = &webhook.Guard{AllowHTTP: true, AllowPrivate: true}

func contractSealer(t *testing.T) *webhook.Sealer {
	t.Helper()
	sealer, err := webhook.NewSealer([]byte("contract-test-webhook-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return sealer
}

// receiver is a webhook receiver answering status to every message.
func receiver(t *testing.T, status int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// waitDeliveries polls endpoint id's deliveries until one has state.
func waitDeliveries(t *testing.T, e *env, admin []string, id, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.call("GET", "/v1/webhooks/"+id+"/deliveries", "", admin...)
		var l struct {
			Items []struct {
				State string `json:"state"`
			} `json:"items"`
		}
		_ = json.Unmarshal(r.body, &l)
		for _, it := range l.Items {
			if it.State == state {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s delivery for %s: %d %s", state, id, r.code, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasRoute(e *env, method, path string) bool {
	for _, r := range e.srv.App().GetRoutes(true) {
		if r.Method == method && r.Path == path {
			return true
		}
	}
	return false
}

const unknownID = "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a"

// bigHeader overflows fasthttp's header buffer (sent over the network, since
// app.Test reports it as an error): 400 on any route.
var bigHeader = []string{"X-Padding", strings.Repeat("p", 9000)}

// TestOpenAPIContract drives every route of the document, success and error
// answers, and validates each request and answer against openapi.json.
func TestOpenAPIContract(t *testing.T) {
	k := loadContract(t)
	e := observed(t)
	rw, r, w, admin := e.as("acme-rw"), e.as("acme-r"), e.as("acme-w"), e.as("acme-admin")
	with := func(a []string, b ...string) []string { return append(append([]string{}, a...), b...) }
	listed := hasRoute(e, "GET", "/v1/requests")

	// operations
	for _, p := range []string{"/", "/healthz", "/livez", "/readyz", "/metrics", "/openapi.json"} {
		k.check(t, e, exchange{name: p, method: "GET", path: p, want: 200})
	}
	k.check(t, e, exchange{name: "request id honoured", method: "GET", path: "/healthz", hdr: []string{"X-Request-Id", "trace-1"}, want: 200})

	// create
	created := k.check(t, e, exchange{name: "create", method: "POST", path: "/v1/requests", body: refCreate,
		hdr: with(rw, "Idempotency-Key", "k1"), want: 202})
	id := created.json(t)["id"].(string)
	tok := created.json(t)["poll_token"].(string)
	k.check(t, e, exchange{name: "create replay", method: "POST", path: "/v1/requests", body: refCreate,
		hdr: with(rw, "Idempotency-Key", `"k1"`), want: 202})
	k.check(t, e, exchange{name: "create minimal", method: "POST", path: "/v1/requests", body: `{"type":"x","context":null}`, hdr: rw, want: 202})
	for _, c := range []struct{ name, body string }{
		{"missing type", `{}`}, {"bad type", `{"type":"Bad Type"}`}, {"unknown member", `{"type":"x","colour":"red"}`},
		{"context not an object", `{"type":"x","context":[1]}`}, {"estimate zero", `{"type":"x","estimated_duration_seconds":0}`},
		{"estimate fraction", `{"type":"x","estimated_duration_seconds":1.5}`}, {"not JSON", `{"type":`},
	} {
		k.check(t, e, exchange{name: "create " + c.name, method: "POST", path: "/v1/requests", body: c.body, hdr: rw,
			want: 400, code: "VALIDATION_FAILED", invalid: true})
	}
	k.check(t, e, exchange{name: "create context too large", method: "POST", path: "/v1/requests",
		body: `{"type":"x","context":{"pad":"` + strings.Repeat("a", 5000) + `"}}`, hdr: rw, want: 400, code: "VALIDATION_FAILED"})
	k.check(t, e, exchange{name: "create bad idempotency key", method: "POST", path: "/v1/requests", body: `{"type":"x"}`,
		hdr: with(rw, "Idempotency-Key", "caf\u00e9"), want: 400, code: "VALIDATION_FAILED", invalid: true})
	// The key's length is counted after unquoting: 255 characters bare, or
	// quoted (257 with the quotes, more with escapes), and no more.
	long := strings.Repeat("k", 255)
	for _, c := range []struct {
		name, key string
		want      int
	}{
		{"255", long, 202}, {"255 quoted", `"` + long + `"`, 202}, {"255 quoted, escapes", `"` + strings.Repeat(`\"`, 255) + `"`, 202},
		{"256", long + "k", 400}, {"256 quoted", `"` + long + `k"`, 400}, {"empty quoted", `""`, 400}, {"bad escape", `"a\b"`, 400},
	} {
		x := exchange{name: "create idempotency key " + c.name, method: "POST", path: "/v1/requests", body: `{"type":"idem.len"}`,
			hdr: with(rw, "Idempotency-Key", c.key), want: c.want}
		if c.want == 400 {
			x.code, x.invalid = "VALIDATION_FAILED", true
		}
		k.check(t, e, x)
	}
	k.check(t, e, exchange{name: "create text/plain", method: "POST", path: "/v1/requests", body: `{"type":"x"}`,
		hdr: with(rw, "Content-Type", "text/plain"), want: 415, code: "UNSUPPORTED_MEDIA_TYPE", invalid: true})
	k.check(t, e, exchange{name: "create no credential", method: "POST", path: "/v1/requests", body: `{"type":"x"}`,
		want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "create wrong key", method: "POST", path: "/v1/requests", body: `{"type":"x"}`,
		hdr: []string{"Authorization", "Bearer nope"}, want: 401, code: "UNAUTHENTICATED"})
	k.check(t, e, exchange{name: "create read key", method: "POST", path: "/v1/requests", body: `{"type":"x"}`, hdr: r,
		want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "create key reused", method: "POST", path: "/v1/requests", body: `{"type":"y"}`,
		hdr: with(rw, "Idempotency-Key", "k1"), want: 422, code: "IDEMPOTENCY_KEY_REUSED"})
	huge := `{"type":"x","context":{"pad":"` + strings.Repeat("a", 70<<10) + `"}}`
	k.check(t, e, exchange{name: "create too large", method: "POST", path: "/v1/requests", body: huge, hdr: rw,
		want: 413, code: "PAYLOAD_TOO_LARGE", network: true})

	// poll
	p := "/v1/requests/" + id
	k.check(t, e, exchange{name: "poll by key", method: "GET", path: p, hdr: r, want: 200})
	k.check(t, e, exchange{name: "poll too early", method: "GET", path: p, hdr: r, want: 429, code: "POLLED_TOO_EARLY"})
	e.clock.Add(time.Second)
	k.check(t, e, exchange{name: "poll not modified", method: "GET", path: p, hdr: with(r, "If-None-Match", `"1"`), want: 304})
	k.check(t, e, exchange{name: "poll by token", method: "GET", path: p, hdr: []string{"X-Poll-Token", tok}, want: 200})
	k.check(t, e, exchange{name: "poll no credential", method: "GET", path: p, want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "poll write-only key", method: "GET", path: p, hdr: w, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "poll unknown", method: "GET", path: "/v1/requests/" + unknownID, hdr: r, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "poll wrong token", method: "GET", path: p, hdr: []string{"X-Poll-Token", tok + "x"}, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "poll malformed id", method: "GET", path: "/v1/requests/not-a-uuid", hdr: r, want: 404, code: "NOT_FOUND", invalid: true})
	k.check(t, e, exchange{name: "poll oversized header", method: "GET", path: p, hdr: with(r, bigHeader...), want: 400, code: "VALIDATION_FAILED", network: true})

	// long poll (docs/reference.md §12): nothing changes, so each is held its second
	for _, x := range []exchange{
		{name: "long poll", method: "GET", path: p, hdr: with(r, "Prefer", "wait=1"), want: 200, network: true},
		{name: "long poll not modified", method: "GET", path: p, hdr: with(r, "Prefer", "wait=1", "If-None-Match", `"1"`), want: 304, network: true},
	} {
		lp := k.check(t, e, x)
		if lp.h.Get("Preference-Applied") != "wait=1" || lp.h.Get("Retry-After") != "0" {
			t.Errorf("%s: Preference-Applied %q, Retry-After %q; want wait=1 and 0", x.name,
				lp.h.Get("Preference-Applied"), lp.h.Get("Retry-After"))
		}
	}

	// events
	ev := p + "/events"
	k.check(t, e, exchange{name: "events by key", method: "GET", path: ev, hdr: r, want: 200})
	k.check(t, e, exchange{name: "events by token", method: "GET", path: ev, hdr: []string{"X-Poll-Token", tok}, want: 200})
	k.check(t, e, exchange{name: "events no credential", method: "GET", path: ev, want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "events write-only key", method: "GET", path: ev, hdr: w, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "events unknown", method: "GET", path: "/v1/requests/" + unknownID + "/events", hdr: r, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "events oversized header", method: "GET", path: ev, hdr: with(r, bigHeader...), want: 400, code: "VALIDATION_FAILED", network: true})

	// transitions
	k.check(t, e, exchange{name: "heartbeat", method: "POST", path: p + "/processing", hdr: w, want: 200})
	k.check(t, e, exchange{name: "progress", method: "POST", path: p + "/processing", body: `{"percent":40,"message":"page 4 of 10"}`,
		hdr: with(w, "Idempotency-Key", "p1"), want: 200})
	k.check(t, e, exchange{name: "progress key reused", method: "POST", path: p + "/processing", body: `{"percent":50}`,
		hdr: with(w, "Idempotency-Key", "p1"), want: 422, code: "IDEMPOTENCY_KEY_REUSED"})
	k.check(t, e, exchange{name: "progress over 100", method: "POST", path: p + "/processing", body: `{"percent":101}`, hdr: w,
		want: 400, code: "VALIDATION_FAILED", invalid: true})
	e.clock.Add(2 * time.Second)
	k.check(t, e, exchange{name: "poll with progress", method: "GET", path: p, hdr: r, want: 200})

	bodies := map[string]string{
		"processing": `{"percent":1}`,
		"complete":   `{"result_type":"answer","result":{"ok":true}}`,
		"fail":       `{"code":"ERR_UPSTREAM","reason":"ledger service unavailable"}`,
		"cancel":     `{"reason":"no longer needed"}`,
	}
	other := map[string]string{ // valid, but not the body first sent with the key
		"processing": `{"percent":2}`,
		"complete":   `{"result_type":"answer","result":{"ok":false}}`,
		"fail":       `{"code":"ERR_OTHER"}`,
		"cancel":     `{"reason":"another reason"}`,
	}
	bad := map[string]string{
		"processing": `{"percent":"high"}`,
		"complete":   `{"result_type":"link","result":{"url":"ftp://x/y","expires_at":"2026-01-01T00:00:00Z"}}`,
		"fail":       `{"code":"lower"}`,
		"cancel":     `{"reason":"` + strings.Repeat("r", 1025) + `"}`,
	}
	for _, tr := range []string{"processing", "complete", "fail", "cancel"} {
		fresh, _ := e.mustCreate("acme-rw")
		fp := "/v1/requests/" + fresh + "/" + tr
		k.check(t, e, exchange{name: tr + " bad body", method: "POST", path: fp, body: bad[tr], hdr: w, want: 400, code: "VALIDATION_FAILED", invalid: true})
		k.check(t, e, exchange{name: tr + " text/plain", method: "POST", path: fp, body: bodies[tr], hdr: with(w, "Content-Type", "text/plain"),
			want: 415, code: "UNSUPPORTED_MEDIA_TYPE", invalid: true})
		k.check(t, e, exchange{name: tr + " no credential", method: "POST", path: fp, body: bodies[tr], want: 401, code: "UNAUTHENTICATED", invalid: true})
		k.check(t, e, exchange{name: tr + " read key", method: "POST", path: fp, body: bodies[tr], hdr: r, want: 403, code: "FORBIDDEN"})
		k.check(t, e, exchange{name: tr + " unknown", method: "POST", path: "/v1/requests/" + unknownID + "/" + tr, body: bodies[tr], hdr: w,
			want: 404, code: "NOT_FOUND"})
		k.check(t, e, exchange{name: tr + " too large", method: "POST", path: fp, body: `{"reason":"` + strings.Repeat("r", 70<<10) + `"}`, hdr: w,
			want: 413, code: "PAYLOAD_TOO_LARGE", network: true, invalid: true})
		k.check(t, e, exchange{name: tr, method: "POST", path: fp, body: bodies[tr], hdr: with(w, "Idempotency-Key", "t-"+tr), want: 200})
		k.check(t, e, exchange{name: tr + " key reused", method: "POST", path: fp, body: other[tr], hdr: with(w, "Idempotency-Key", "t-"+tr),
			want: 422, code: "IDEMPOTENCY_KEY_REUSED"})
	}
	for _, c := range []struct{ name, body string }{
		{"link", `{"result_type":"link","result":{"url":"https://files.example/x.pdf?sig=1","expires_at":"2026-11-30T10:00:00Z","checksum_sha256":"` +
			strings.Repeat("ab", 32) + `","size_bytes":1024,"content_type":"application/pdf"}}`},
		{"confirmation", `{"result_type":"confirmation","result":{"confirmed":true,"message":"done"}}`},
	} {
		fresh, _ := e.mustCreate("acme-rw")
		k.check(t, e, exchange{name: "complete " + c.name, method: "POST", path: "/v1/requests/" + fresh + "/complete", body: c.body, hdr: w, want: 200})
		k.check(t, e, exchange{name: "poll " + c.name, method: "GET", path: "/v1/requests/" + fresh, hdr: r, want: 200})
	}
	k.check(t, e, exchange{name: "answer too large", method: "POST", path: p + "/complete",
		body: `{"result_type":"answer","result":{"pad":"` + strings.Repeat("x", 17000) + `"}}`, hdr: w, want: 400, code: "VALIDATION_FAILED"})
	k.check(t, e, exchange{name: "cancel bare", method: "POST", path: p + "/cancel", hdr: w, want: 200})
	for _, tr := range []string{"processing", "complete", "fail", "cancel"} {
		m := k.check(t, e, exchange{name: tr + " terminal", method: "POST", path: p + "/" + tr, body: bodies[tr], hdr: w,
			want: 409, code: "ASYNC_REQUEST_ALREADY_TERMINAL"}).json(t)
		if m["request"].(map[string]any)["status"] != "cancelled" {
			t.Fatalf("409 request member %v", m["request"])
		}
	}
	k.check(t, e, exchange{name: "poll terminal", method: "GET", path: p, hdr: r, want: 200})
	k.check(t, e, exchange{name: "events terminal", method: "GET", path: ev, hdr: r, want: 200})

	// event stream (docs/reference.md §12) of the terminal request: its one event, then the end
	st := p + "/stream"
	for _, x := range []exchange{
		{name: "stream", method: "GET", path: st, hdr: r, want: 200, network: true},
		{name: "stream by query token", method: "GET", path: st + "?poll_token=" + tok, want: 200, network: true},
	} {
		sr := k.check(t, e, x)
		if body := string(sr.body); !strings.HasPrefix(body, "retry: 2000\n\n") || strings.Count(body, "event: request\n") != 1 ||
			!strings.Contains(body, `"status":"cancelled"`) || sr.h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: %v\n%s", x.name, sr.h, body)
		}
	}
	k.check(t, e, exchange{name: "stream seen the end", method: "GET", path: st, hdr: with(r, "Last-Event-ID", pollVersion(t, e, p, r)), want: 204, network: true})
	k.check(t, e, exchange{name: "stream no credential", method: "GET", path: st, want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "stream write-only key", method: "GET", path: st, hdr: w, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "stream unknown", method: "GET", path: "/v1/requests/" + unknownID + "/stream", hdr: r, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "stream wrong query token", method: "GET", path: st + "?poll_token=" + tok + "x", want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "stream oversized header", method: "GET", path: st, hdr: with(r, bigHeader...), want: 400, code: "VALIDATION_FAILED", network: true})

	// list (GET /v1/requests), once it is served
	if listed {
		k.check(t, e, exchange{name: "list", method: "GET", path: "/v1/requests", hdr: r, want: 200})
		page := k.check(t, e, exchange{name: "list page", method: "GET", path: "/v1/requests?limit=1&status=queued,cancelled&type=statement.export", hdr: r, want: 200})
		if next, _ := page.json(t)["next_cursor"].(string); next != "" {
			k.check(t, e, exchange{name: "list next page", method: "GET", path: "/v1/requests?limit=1&status=queued,cancelled&type=statement.export&cursor=" + next, hdr: r, want: 200})
		}
		k.check(t, e, exchange{name: "list by time", method: "GET", path: "/v1/requests?created_after=2020-01-01T00:00:00Z&created_before=2999-01-01T00:00:00Z", hdr: r, want: 200})
		k.check(t, e, exchange{name: "list empty filters", method: "GET", path: "/v1/requests?type=&status=&created_after=&created_before=&limit=&cursor=", hdr: r, want: 200})
		k.check(t, e, exchange{name: "list status in any case", method: "GET", path: "/v1/requests?status=QUEUED,%20Cancelled", hdr: r, want: 200})
		k.check(t, e, exchange{name: "list empty status in a list", method: "GET", path: "/v1/requests?status=queued,,failed", hdr: r, want: 400, code: "VALIDATION_FAILED", invalid: true})
		k.check(t, e, exchange{name: "list bad time", method: "GET", path: "/v1/requests?created_after=yesterday", hdr: r, want: 400, code: "VALIDATION_FAILED", invalid: true})
		k.check(t, e, exchange{name: "list bad limit", method: "GET", path: "/v1/requests?limit=0", hdr: r, want: 400, code: "VALIDATION_FAILED", invalid: true})
		k.check(t, e, exchange{name: "list limit over", method: "GET", path: "/v1/requests?limit=201", hdr: r, want: 400, code: "VALIDATION_FAILED", invalid: true})
		k.check(t, e, exchange{name: "list bad status", method: "GET", path: "/v1/requests?status=done", hdr: r, want: 400, code: "VALIDATION_FAILED", invalid: true})
		k.check(t, e, exchange{name: "list garbled cursor", method: "GET", path: "/v1/requests?cursor=garbled", hdr: r, want: 400, code: "INVALID_CURSOR"})
		k.check(t, e, exchange{name: "list no credential", method: "GET", path: "/v1/requests", want: 401, code: "UNAUTHENTICATED", invalid: true})
		k.check(t, e, exchange{name: "list by poll token", method: "GET", path: "/v1/requests", hdr: []string{"X-Poll-Token", tok}, want: 401, code: "UNAUTHENTICATED", invalid: true})
		k.check(t, e, exchange{name: "list write-only key", method: "GET", path: "/v1/requests", hdr: w, want: 403, code: "FORBIDDEN"})
		k.check(t, e, exchange{name: "list by label", method: "GET", path: "/v1/requests?label_selector=env=prod,team=a", hdr: r, want: 200})
		k.check(t, e, exchange{name: "list bad label selector", method: "GET", path: "/v1/requests?label_selector=env", hdr: r, want: 400, code: "VALIDATION_FAILED", invalid: true})
		k.check(t, e, exchange{name: "lookup", method: "GET", path: "/v1/requests?ids=" + id + ",nope", hdr: r, want: 200})
		k.check(t, e, exchange{name: "lookup with a filter", method: "GET", path: "/v1/requests?ids=" + id + "&type=x", hdr: r, want: 400, code: "VALIDATION_FAILED"})
		k.check(t, e, exchange{name: "counts", method: "GET", path: "/v1/requests/counts", hdr: r, want: 200})
		k.check(t, e, exchange{name: "counts by label", method: "GET", path: "/v1/requests/counts?label_selector=env=prod&created_after=2020-01-01T00:00:00Z", hdr: r, want: 200})
		k.check(t, e, exchange{name: "counts by type", method: "GET", path: "/v1/requests/counts?type=statement.export", hdr: r, want: 200})
		k.check(t, e, exchange{name: "counts bad query", method: "GET", path: "/v1/requests/counts?type=X", hdr: r, want: 400, code: "VALIDATION_FAILED", invalid: true})
		k.check(t, e, exchange{name: "counts no credential", method: "GET", path: "/v1/requests/counts", want: 401, code: "UNAUTHENTICATED", invalid: true})
		k.check(t, e, exchange{name: "counts write-only key", method: "GET", path: "/v1/requests/counts", hdr: w, want: 403, code: "FORBIDDEN"})
	}

	// standard long-running-operation clients (docs/reference.md §15; lro_contract_test.go)
	contractLRORoutes(t, k, e, r, w, rw, admin)

	// webhooks (docs/reference.md §10)
	wid := contractWebhookRoutes(t, k, e, rw, admin)

	// delete
	k.check(t, e, exchange{name: "delete no credential", method: "DELETE", path: p, want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "delete rw key", method: "DELETE", path: p, hdr: rw, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "delete oversized header", method: "DELETE", path: p, hdr: with(admin, bigHeader...), want: 400, code: "VALIDATION_FAILED", network: true})
	k.check(t, e, exchange{name: "delete", method: "DELETE", path: p, hdr: admin, want: 204})
	k.check(t, e, exchange{name: "delete again", method: "DELETE", path: p, hdr: admin, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "poll deleted", method: "GET", path: p, hdr: r, want: 404, code: "NOT_FOUND"})

	// frozen tenant: reads and creates 403, transitions still accepted
	live, liveTok := e.mustCreate("acme-rw")
	lp := "/v1/requests/" + live
	if err := e.st.SetFrozen(context.Background(), "acme", true); err != nil {
		t.Fatal(err)
	}
	k.check(t, e, exchange{name: "create frozen", method: "POST", path: "/v1/requests", body: `{"type":"x"}`, hdr: rw, want: 403, code: "TENANT_FROZEN"})
	k.check(t, e, exchange{name: "poll frozen", method: "GET", path: lp, hdr: r, want: 403, code: "TENANT_FROZEN"})
	k.check(t, e, exchange{name: "poll frozen by token", method: "GET", path: lp, hdr: []string{"X-Poll-Token", liveTok}, want: 403, code: "TENANT_FROZEN"})
	k.check(t, e, exchange{name: "events frozen", method: "GET", path: lp + "/events", hdr: r, want: 403, code: "TENANT_FROZEN"})
	k.check(t, e, exchange{name: "stream frozen", method: "GET", path: lp + "/stream", hdr: r, want: 403, code: "TENANT_FROZEN"})
	if listed {
		k.check(t, e, exchange{name: "list frozen", method: "GET", path: "/v1/requests", hdr: r, want: 403, code: "TENANT_FROZEN"})
	}
	k.check(t, e, exchange{name: "complete frozen", method: "POST", path: lp + "/complete", body: bodies["complete"], hdr: w, want: 200})
	k.check(t, e, exchange{name: "register webhook frozen", method: "POST", path: "/v1/webhooks", body: `{"url":"https://partner.example/h"}`,
		hdr: admin, want: 403, code: "TENANT_FROZEN"})
	k.check(t, e, exchange{name: "list webhooks frozen", method: "GET", path: "/v1/webhooks", hdr: admin, want: 403, code: "TENANT_FROZEN"})
	k.check(t, e, exchange{name: "get webhook frozen", method: "GET", path: "/v1/webhooks/" + wid, hdr: admin, want: 403, code: "TENANT_FROZEN"})
	if err := e.st.SetFrozen(context.Background(), "acme", false); err != nil {
		t.Fatal(err)
	}

	// rate limited: every authenticated route
	rl := &env{t: t, st: e.st, m: e.m, rdb: e.rdb, clock: e.clock, keys: e.keys}
	ro := app.Options{HTTP: httpapi.Options{BodyLimitBytes: 64 << 10}}
	contractParts(t, &ro)
	rl.srv = rl.compose(e.st, time.Second, &fakeLimiter{left: 0}, ro)
	for _, x := range authedExchanges(live, liveTok, listed, rw, admin) {
		x.name += " rate limited"
		x.want, x.code = 429, "RATE_LIMITED"
		k.check(t, rl, x)
	}

	// Redis down: 503 everywhere but /healthz
	down := downEnv(t, e)
	k.check(t, down, exchange{name: "readyz down", method: "GET", path: "/readyz", want: 503, code: "BACKEND_UNAVAILABLE"})
	k.check(t, down, exchange{name: "healthz down", method: "GET", path: "/healthz", want: 200})
	for _, x := range authedExchanges(live, liveTok, listed, rw, admin) {
		x.name += " down"
		x.want, x.code = 503, "BACKEND_UNAVAILABLE"
		k.check(t, down, x)
	}

	k.requireCoverage(t, listed)
}

// downEnv is e's keys in front of a server whose Redis refuses connections (an
// address nothing listens on; a closed miniredis still accepts Dial).
func downEnv(t *testing.T, e *env) *env {
	rdb := deadRedis(t)
	st, err := store.New(rdb, store.Options{Now: e.clock.Now, OpTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	down := &env{t: e.t, st: st, m: e.m, rdb: rdb, clock: e.clock, keys: e.keys}
	do := app.Options{HTTP: httpapi.Options{BodyLimitBytes: 64 << 10}}
	contractParts(t, &do)
	down.srv = down.compose(st, time.Second, nil, do)
	return down
}

// pollVersion is the version of the request at path p, read with an
// unpaced events-free poll (the ETag).
func pollVersion(t *testing.T, e *env, p string, cred []string) string {
	t.Helper()
	e.clock.Add(time.Minute)
	r := e.call("GET", p, "", cred...)
	v := strings.Trim(r.h.Get("ETag"), `"`)
	if r.code != 200 || v == "" {
		t.Fatalf("poll %s: %d, ETag %q", p, r.code, r.h.Get("ETag"))
	}
	return v
}

// authedExchanges is one valid call of every authenticated operation.
func authedExchanges(id, tok string, listed bool, rw, admin []string) []exchange {
	p := "/v1/requests/" + id
	x := []exchange{
		{name: "create", method: "POST", path: "/v1/requests", body: `{"type":"x"}`, hdr: rw},
		{name: "poll", method: "GET", path: p, hdr: rw},
		{name: "poll by token", method: "GET", path: p, hdr: []string{"X-Poll-Token", tok}},
		{name: "events", method: "GET", path: p + "/events", hdr: rw},
		{name: "stream", method: "GET", path: p + "/stream", hdr: rw},
		{name: "processing", method: "POST", path: p + "/processing", hdr: rw},
		{name: "complete", method: "POST", path: p + "/complete", body: `{"result_type":"answer","result":{}}`, hdr: rw},
		{name: "fail", method: "POST", path: p + "/fail", body: `{"code":"ERR_X"}`, hdr: rw},
		{name: "cancel", method: "POST", path: p + "/cancel", hdr: rw},
		{name: "delete", method: "DELETE", path: p, hdr: admin},
		{name: "register webhook", method: "POST", path: "/v1/webhooks", body: `{"url":"https://partner.example/h"}`, hdr: admin},
		{name: "list webhooks", method: "GET", path: "/v1/webhooks", hdr: admin},
		{name: "get webhook", method: "GET", path: "/v1/webhooks/" + unknownWebhook, hdr: admin},
		{name: "delete webhook", method: "DELETE", path: "/v1/webhooks/" + unknownWebhook, hdr: admin},
		{name: "webhook deliveries", method: "GET", path: "/v1/webhooks/" + unknownWebhook + "/deliveries", hdr: admin},
	}
	if listed {
		x = append(x, exchange{name: "list", method: "GET", path: "/v1/requests", hdr: rw},
			exchange{name: "counts", method: "GET", path: "/v1/requests/counts", hdr: rw})
	}
	return append(x, lroExchanges(id, tok, rw, admin)...)
}

// requireCoverage fails unless every answer the document lists for every
// operation was seen: the document promises nothing the test did not exercise.
func (k *contract) requireCoverage(t *testing.T, listed bool) {
	t.Helper()
	var missing []string
	for path, item := range k.doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "listRequests" && !listed {
				t.Logf("GET /v1/requests is documented but not served yet (internal/httpapi/list.go): not exercised")
				continue
			}
			for status := range op.Responses.Map() {
				n, err := strconv.Atoi(status)
				if err != nil {
					t.Fatalf("%s %s: response %q is not a status code", method, path, status)
				}
				if !k.seen[op.OperationID][n] {
					missing = append(missing, fmt.Sprintf("%s %s %d", method, path, n))
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("documented answers no exchange produced:\n  %s", strings.Join(missing, "\n  "))
	}
}

// TestOpenAPIDescribesEveryRoute: every route the server registers is in the
// document and every operation of the document is served (GET /v1/requests
// excepted until list.go lands).
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	k := loadContract(t)
	e := observed(t)
	documented := map[string]bool{}
	for path, item := range k.doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, r := range e.srv.App().GetRoutes(true) {
		if r.Method == "HEAD" { // Fiber serves HEAD for every GET
			continue
		}
		path := strings.ReplaceAll(r.Path, `\:`, ":") // a custom verb's escaped colon (google.go)
		for _, p := range r.Params {
			path = strings.Replace(path, ":"+p, "{"+p+"}", 1)
		}
		served[r.Method+" "+path] = true
		if !documented[r.Method+" "+path] {
			t.Errorf("%s %s is served but not in openapi.json", r.Method, r.Path)
		}
	}
	for op := range documented {
		if !served[op] {
			if op == "GET /v1/requests" {
				t.Logf("%s is documented but not served yet", op)
				continue
			}
			t.Errorf("%s is in openapi.json but not served", op)
		}
	}
	// The webhook routes (served with webhooks.enabled, as observed's server is).
	for _, op := range []string{"POST /v1/webhooks", "GET /v1/webhooks", "GET /v1/webhooks/{id}", "DELETE /v1/webhooks/{id}",
		"GET /v1/webhooks/{id}/deliveries"} {
		if !documented[op] || !served[op] {
			t.Errorf("%s: documented %v, served %v", op, documented[op], served[op])
		}
	}
}

// TestOpenAPIServed: /openapi.json is the embedded document, as JSON, without
// a credential.
func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t, nil)
	r := e.call("GET", "/openapi.json", "")
	if r.code != 200 || !strings.HasPrefix(r.h.Get("Content-Type"), "application/json") {
		t.Fatalf("%d %q", r.code, r.h.Get("Content-Type"))
	}
	if !bytes.Equal(r.body, httpapi.OpenAPI()) {
		t.Fatal("served document differs from the embedded one")
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, %v", doc.OpenAPI, err)
	}
}

// TestOpenAPIRefusesWhatServerRefuses spot-checks that the document is strict:
// an answer with an undocumented member or a missing header fails validation.
func TestOpenAPIRefusesWhatServerRefuses(t *testing.T) {
	k := loadContract(t)
	req := httptest.NewRequest("GET", "/v1/requests/"+unknownID, nil)
	req.Header.Set("Authorization", "Bearer x")
	route, params, err := k.router.FindRoute(req)
	if err != nil {
		t.Fatal(err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: presentCredential}}
	good := `{"id":"` + unknownID + `","type":"x","status":"queued","done":false,"created_by":"key_1","created_at":"2026-11-29T10:00:00.000Z",` +
		`"updated_at":"2026-11-29T10:00:00.000Z","completed_at":null,"expires_at":null,"version":1}`
	hdr := http.Header{"Content-Type": {"application/json"}, "Etag": {`"1"`}, "Cache-Control": {"no-store"}, "X-Request-Id": {"r"}}
	validate := func(h http.Header, body string) error {
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: 200, Header: h,
			Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		out.SetBodyBytes([]byte(body))
		return openapi3filter.ValidateResponse(context.Background(), out)
	}
	if err := validate(hdr, good); err != nil {
		t.Fatalf("a good answer fails: %v", err)
	}
	if validate(hdr, strings.Replace(good, `"version":1`, `"version":1,"poll_token":"abc"`, 1)) == nil {
		t.Error("a poll answer with poll_token passes")
	}
	if validate(hdr, strings.Replace(good, `"completed_at":null`, `"completed_at":"2026-11-29T10:00:00Z"`, 1)) == nil {
		t.Error("a time without milliseconds passes")
	}
	noTag := hdr.Clone()
	noTag.Del("Etag")
	if validate(noTag, good) == nil {
		t.Error("an answer without ETag passes")
	}

	// A webhook endpoint read back must not carry its secret.
	wreq := httptest.NewRequest("GET", "/v1/webhooks/"+unknownWebhook, nil)
	wreq.Header.Set("Authorization", "Bearer x")
	wroute, wparams, err := k.router.FindRoute(wreq)
	if err != nil {
		t.Fatal(err)
	}
	win := &openapi3filter.RequestValidationInput{Request: wreq, PathParams: wparams, Route: wroute,
		Options: &openapi3filter.Options{AuthenticationFunc: presentCredential}}
	endpoint := `{"id":"` + unknownWebhook + `","url":"https://partner.example/h","events":["request.failed"],"description":"",` +
		`"created_at":"2026-11-29T10:00:00.000Z"}`
	wvalidate := func(body string) error {
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: win, Status: 200,
			Header:  http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}, "X-Request-Id": {"r"}},
			Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		out.SetBodyBytes([]byte(body))
		return openapi3filter.ValidateResponse(context.Background(), out)
	}
	if err := wvalidate(endpoint); err != nil {
		t.Fatalf("a good endpoint answer fails: %v", err)
	}
	if wvalidate(strings.Replace(endpoint, `"description":""`, `"description":"","secret":"whsec_`+strings.Repeat("A", 32)+`"`, 1)) == nil {
		t.Error("an endpoint read back with its secret passes")
	}
}

// unknownWebhook is a well-formed endpoint id nobody registered.
const unknownWebhook = "ep_aaaaaaaaaaaaaaaaaaaaaaaa"

// contractWebhookRoutes drives every /v1/webhooks operation, success and error
// answers, with e's dispatcher (contractParts) delivering to receivers on loopback so that the
// deliveries listing holds every kind of attempt. It returns a live endpoint id.
func contractWebhookRoutes(t *testing.T, k *contract, e *env, rw, admin []string) string {
	t.Helper()
	with := func(a []string, b ...string) []string { return append(append([]string{}, a...), b...) }
	ok, failing := receiver(t, 204), receiver(t, 500)
	refused := func() string { // an address nothing listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return "http://" + ln.Addr().String()
	}()

	// register
	reg := func(name, url string) string {
		r := k.check(t, e, exchange{name: "register webhook " + name, method: "POST", path: "/v1/webhooks",
			body: `{"url":"` + url + `/hooks","events":["request.succeeded","request.created","request.created"],"description":"contract ` + name + `"}`,
			hdr:  admin, want: 201})
		m := r.json(t)
		if sec, _ := m["secret"].(string); !strings.HasPrefix(sec, "whsec_") {
			t.Fatalf("register %s: no secret in %s", name, r.body)
		}
		return m["id"].(string)
	}
	wid, failID, refusedID := reg("ok", ok), reg("failing", failing), reg("refused", refused)
	def := k.check(t, e, exchange{name: "register webhook default events", method: "POST", path: "/v1/webhooks",
		body: `{"url":"https://partner.example/other"}`, hdr: admin, want: 201}).json(t)["id"].(string)
	for _, c := range []struct{ name, body string }{
		{"no url", `{}`}, {"empty url", `{"url":""}`}, {"unknown event", `{"url":"https://partner.example/","events":["request.updated"]}`},
		{"no events", `{"url":"https://partner.example/","events":[]}`}, {"events not a list", `{"url":"https://partner.example/","events":"request.failed"}`},
		{"long description", `{"url":"https://partner.example/","description":"` + strings.Repeat("d", 257) + `"}`},
		{"secret given", `{"url":"https://partner.example/","secret":"whsec_mine"}`}, {"not an object", `[1]`}, {"not JSON", `{"url":`},
	} {
		k.check(t, e, exchange{name: "register webhook " + c.name, method: "POST", path: "/v1/webhooks", body: c.body, hdr: admin,
			want: 400, code: "VALIDATION_FAILED", invalid: true})
	}
	// The document's url pattern refuses what the service refuses: another
	// scheme, credentials, a fragment, a port outside 1..65535 or an empty one.
	for _, c := range []struct{ name, url string }{
		{"ftp", "ftp://partner.example/h"}, {"credentials", "https://u:p@partner.example/h"}, {"fragment", "https://partner.example/h#x"},
		{"port 0", "https://partner.example:0/h"}, {"port 99999", "https://partner.example:99999/h"}, {"empty port", "https://partner.example:/h"},
		{"space", "https://partner.example/a b"}, {"no host", "https:///h"},
	} {
		k.check(t, e, exchange{name: "register webhook " + c.name, method: "POST", path: "/v1/webhooks", body: `{"url":"` + c.url + `"}`,
			hdr: admin, want: 400, code: "VALIDATION_FAILED", invalid: true})
	}
	// ... and accepts what it accepts.
	for _, url := range []string{"HTTPS://partner.example:443/h?a=1&b=%20", "https://partner.example:65535"} {
		k.check(t, e, exchange{name: "register webhook " + url, method: "POST", path: "/v1/webhooks", body: `{"url":"` + url + `"}`,
			hdr: admin, want: 201})
	}
	k.check(t, e, exchange{name: "register webhook text/plain", method: "POST", path: "/v1/webhooks", body: `{"url":"https://partner.example/h"}`,
		hdr: with(admin, "Content-Type", "text/plain"), want: 415, code: "UNSUPPORTED_MEDIA_TYPE", invalid: true})
	k.check(t, e, exchange{name: "register webhook no credential", method: "POST", path: "/v1/webhooks", body: `{"url":"https://partner.example/h"}`,
		want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "register webhook rw key", method: "POST", path: "/v1/webhooks", body: `{"url":"https://partner.example/h"}`,
		hdr: rw, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "register webhook too large", method: "POST", path: "/v1/webhooks",
		body: `{"url":"https://partner.example/h","description":"` + strings.Repeat("d", 70<<10) + `"}`, hdr: admin,
		want: 413, code: "PAYLOAD_TOO_LARGE", network: true, invalid: true})

	// list, get
	k.check(t, e, exchange{name: "list webhooks", method: "GET", path: "/v1/webhooks", hdr: admin, want: 200})
	k.check(t, e, exchange{name: "list webhooks other tenant", method: "GET", path: "/v1/webhooks", hdr: e.as("globex-rw"), want: 200})
	k.check(t, e, exchange{name: "list webhooks no credential", method: "GET", path: "/v1/webhooks", want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "list webhooks rw key", method: "GET", path: "/v1/webhooks", hdr: rw, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "list webhooks oversized header", method: "GET", path: "/v1/webhooks", hdr: with(admin, bigHeader...),
		want: 400, code: "VALIDATION_FAILED", network: true})
	wp := "/v1/webhooks/" + wid
	k.check(t, e, exchange{name: "get webhook", method: "GET", path: wp, hdr: admin, want: 200})
	k.check(t, e, exchange{name: "get webhook no credential", method: "GET", path: wp, want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "get webhook rw key", method: "GET", path: wp, hdr: rw, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "get webhook other tenant", method: "GET", path: wp, hdr: e.as("globex-rw"), want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "get webhook unknown", method: "GET", path: "/v1/webhooks/" + unknownWebhook, hdr: admin, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "get webhook malformed id", method: "GET", path: "/v1/webhooks/nope", hdr: admin, want: 404, code: "NOT_FOUND", invalid: true})
	k.check(t, e, exchange{name: "get webhook oversized header", method: "GET", path: wp, hdr: with(admin, bigHeader...),
		want: 400, code: "VALIDATION_FAILED", network: true})

	// deliveries: one delivered, one retrying (the receiver answered 500), one
	// retrying without a status (nothing listens)
	k.check(t, e, exchange{name: "webhook deliveries none yet", method: "GET", path: wp + "/deliveries", hdr: admin, want: 200})
	created, _ := e.mustCreate("acme-rw")
	waitDeliveries(t, e, admin, wid, "delivered")
	waitDeliveries(t, e, admin, failID, "retrying")
	waitDeliveries(t, e, admin, refusedID, "retrying")
	for _, c := range []struct{ name, id string }{{"delivered", wid}, {"failing", failID}, {"refused", refusedID}} {
		r := k.check(t, e, exchange{name: "webhook deliveries " + c.name, method: "GET", path: "/v1/webhooks/" + c.id + "/deliveries", hdr: admin, want: 200})
		if !strings.Contains(string(r.body), created) {
			t.Fatalf("deliveries %s do not name request %s: %s", c.name, created, r.body)
		}
	}
	dp := wp + "/deliveries"
	k.check(t, e, exchange{name: "webhook deliveries no credential", method: "GET", path: dp, want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "webhook deliveries rw key", method: "GET", path: dp, hdr: rw, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "webhook deliveries other tenant", method: "GET", path: dp, hdr: e.as("globex-rw"), want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "webhook deliveries unknown", method: "GET", path: "/v1/webhooks/" + unknownWebhook + "/deliveries", hdr: admin,
		want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "webhook deliveries malformed id", method: "GET", path: "/v1/webhooks/nope/deliveries", hdr: admin,
		want: 404, code: "NOT_FOUND", invalid: true})
	k.check(t, e, exchange{name: "webhook deliveries oversized header", method: "GET", path: dp, hdr: with(admin, bigHeader...),
		want: 400, code: "VALIDATION_FAILED", network: true})

	// delete (the endpoints that would retry go too: nothing is left pending)
	dd := "/v1/webhooks/" + def
	k.check(t, e, exchange{name: "delete webhook no credential", method: "DELETE", path: dd, want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "delete webhook rw key", method: "DELETE", path: dd, hdr: rw, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "delete webhook other tenant", method: "DELETE", path: dd, hdr: e.as("globex-rw"), want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "delete webhook oversized header", method: "DELETE", path: dd, hdr: with(admin, bigHeader...),
		want: 400, code: "VALIDATION_FAILED", network: true})
	for _, id := range []string{def, failID, refusedID} {
		k.check(t, e, exchange{name: "delete webhook", method: "DELETE", path: "/v1/webhooks/" + id, hdr: admin, want: 204})
	}
	k.check(t, e, exchange{name: "delete webhook again", method: "DELETE", path: dd, hdr: admin, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "delete webhook malformed id", method: "DELETE", path: "/v1/webhooks/nope", hdr: admin, want: 404, code: "NOT_FOUND", invalid: true})
	k.check(t, e, exchange{name: "get deleted webhook", method: "GET", path: dd, hdr: admin, want: 404, code: "NOT_FOUND"})
	return wid
}
