package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestLRONotFoundIsUniform: the status monitor and the Operations routes
// answer every id the caller may not see with one body (apart from the call's
// own id) and one set of headers, without RateLimit-* (docs/reference.md §2, §15).
func TestLRONotFoundIsUniform(t *testing.T) {
	e := newEnv(t, nil)
	// counted by the middleware: the other answers carry RateLimit-*
	e.srv = e.compose(e.st, time.Second, &fakeLimiter{left: 1000}, app.Options{})
	u := e.unseeable()
	type face struct {
		bodies  []string
		headers []string
	}
	faces := map[string]*face{"monitor": {}, "google": {}}
	add := func(name string, r resp) {
		t.Helper()
		f := faces["monitor"]
		if strings.HasPrefix(name, "operation") {
			f = faces["google"]
			wantGoogleError(t, r, 404, "NOT_FOUND")
		} else {
			m := wantProblem(t, r, 404, "NOT_FOUND")
			r.body = []byte(strings.Replace(string(r.body), `"instance":`+mustQuote(m["instance"].(string)), `"instance":""`, 1))
		}
		var m map[string]any
		_ = json.Unmarshal(r.body, &m)
		id := ""
		if rid, ok := m["request_id"].(string); ok {
			id = rid
		} else {
			id = m["error"].(map[string]any)["details"].([]any)[0].(map[string]any)["metadata"].(map[string]any)["request_id"].(string)
		}
		f.bodies = append(f.bodies, strings.Replace(string(r.body), mustQuote(id), `""`, 1))
		var hs []string
		for k := range r.h {
			hs = append(hs, k)
		}
		slices.Sort(hs)
		h := strings.Join(hs, ",")
		if strings.Contains(h, "Ratelimit") {
			t.Errorf("%s: a 404 carries rate limit headers: %v", name, r.h)
		}
		f.headers = append(f.headers, h)
	}
	for _, id := range []string{u.foreign, unknownID, "not-a-uuid", u.deleted, u.expired} {
		add("monitor "+id, e.call("GET", "/v1/requests/"+id+"/operation", "", e.as("acme-rw")...))
		add("operation get "+id, e.call("GET", "/v1/operations/"+id, "", e.as("acme-rw")...))
		add("operation cancel "+id, e.call("POST", "/v1/operations/"+id+":cancel", "", e.as("acme-rw")...))
		add("operation wait "+id, e.call("POST", "/v1/operations/"+id+":wait", "", e.as("acme-rw")...))
		add("operation delete "+id, e.call("DELETE", "/v1/operations/"+id, "", e.as("acme-admin")...))
	}
	for _, c := range [][2]string{{u.mine, u.mineTok + "x"}, {u.mine, "acme.AAAA"}, {u.foreign, u.mineTok}, {u.deleted, u.deletedTok}, {u.expired, u.expiredTok}} {
		add("monitor by token "+c[0], e.call("GET", "/v1/requests/"+c[0]+"/operation", "", "X-Poll-Token", c[1]))
		add("operation get by token "+c[0], e.call("GET", "/v1/operations/"+c[0], "", "X-Poll-Token", c[1]))
		add("operation wait by token "+c[0], e.call("POST", "/v1/operations/"+c[0]+":wait", "", "X-Poll-Token", c[1]))
	}
	for name, f := range faces {
		for i := range f.bodies {
			if f.bodies[i] != f.bodies[0] || f.headers[i] != f.headers[0] {
				t.Fatalf("%s 404 %d differs:\n%s %s\n%s %s", name, i, f.bodies[i], f.headers[i], f.bodies[0], f.headers[0])
			}
		}
	}
}

// TestLROWaits: a long poll of the status monitor or of an operation is the
// poll's (woken by a change on the other replica, its parked answer naming
// URLs with the host the caller called, not "localhost"); :wait ends only when the operation is done or
// its timeout passes.
func TestLROWaits(t *testing.T) {
	for _, be := range testenv.Backends()[:2] {
		t.Run(be.Name, func(t *testing.T) {
			p := newReplicaPair(t, be, nil, nil)
			auth := []string{"Authorization", "Bearer " + p.key}

			id, tok := p.create(t)
			later(t, 300*time.Millisecond, func() { p.transition(t, id, "complete", `{"result_type":"answer","result":{}}`) })
			r := do(t, "GET", p.urlA+"/v1/requests/"+id+"/operation", "", 10*time.Second, "X-Poll-Token", tok, "Prefer", "wait=25")
			var mon map[string]any
			if err := json.Unmarshal(r.body, &mon); err != nil || r.code != 200 || mon["status"] != "Succeeded" ||
				mon["resourceLocation"] != p.urlA+"/v1/requests/"+id || r.h.Get("Preference-Applied") != "wait=25" {
				t.Fatalf("monitor long poll: %d %v %s", r.code, r.h, r.body)
			}

			id, _ = p.create(t)
			later(t, 300*time.Millisecond, func() { p.transition(t, id, "processing", `{"percent":5}`) })
			r = do(t, "GET", p.urlA+"/v1/operations/"+id, "", 10*time.Second, append(auth, "Prefer", "wait=25")...)
			if r.code != 200 || !strings.Contains(string(r.body), `"status":"processing"`) || !strings.Contains(string(r.body), `"done":false`) {
				t.Fatalf("operation long poll: %d %s", r.code, r.body)
			}

			// :wait holds through a heartbeat and answers the end.
			start := time.Now()
			later(t, 300*time.Millisecond, func() { p.transition(t, id, "processing", `{"percent":50}`) })
			later(t, 900*time.Millisecond, func() { p.transition(t, id, "fail", `{"code":"ERR_UPSTREAM","reason":"down"}`) })
			r = do(t, "POST", p.urlA+"/v1/operations/"+id+":wait", `{"timeout":"20s"}`, 10*time.Second, auth...)
			if r.code != 200 || !strings.Contains(string(r.body), `"done":true`) || !strings.Contains(string(r.body), `"code":2,`) ||
				time.Since(start) < 800*time.Millisecond || r.h.Get("Retry-After") != "" {
				t.Fatalf(":wait after %s: %d %v %s", time.Since(start), r.code, r.h, r.body)
			}
			// ... or its timeout, not done.
			id, _ = p.create(t)
			start = time.Now()
			r = do(t, "POST", p.urlA+"/v1/operations/"+id+":wait", `{"timeout":"1s"}`, 10*time.Second, auth...)
			if r.code != 200 || !strings.Contains(string(r.body), `"done":false`) || time.Since(start) < time.Second || r.h.Get("Retry-After") != "0" {
				t.Fatalf(":wait timeout after %s: %d %v %s", time.Since(start), r.code, r.h, r.body)
			}
			waitWaiting(t, p.a, 0)
		})
	}
}

// TestLROCORS: a page on an allowed origin reads the monitor's and the
// operations' answers, errors included, with the headers exposed.
func TestLROCORS(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[0], func(o *app.Options) { o.HTTP.CORSOrigins = []string{"https://app.example"} }, nil)
	id, tok := p.create(t)
	for _, c := range []struct {
		method, path string
		hdr          []string
		code         int
	}{
		{"GET", "/v1/requests/" + id + "/operation", []string{"X-Poll-Token", tok}, 200},
		{"GET", "/v1/operations/" + id, []string{"Authorization", "Bearer " + p.key}, 200},
		{"GET", "/v1/operations/" + id, nil, 401},
		{"POST", "/v1/operations/" + unknownID + ":cancel", []string{"Authorization", "Bearer " + p.key}, 404},
	} {
		r := do(t, c.method, p.urlA+c.path, "", 5*time.Second, append(c.hdr, "Origin", "https://app.example")...)
		if r.code != c.code || r.h.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			!strings.Contains(r.h.Get("Access-Control-Expose-Headers"), "Retry-After") || !strings.Contains(r.h.Get("Access-Control-Expose-Headers"), "ETag") {
			t.Fatalf("%s %s: %d %v", c.method, c.path, r.code, r.h)
		}
	}
	r := do(t, "OPTIONS", p.urlA+"/v1/operations/"+id+":cancel", "", 5*time.Second, "Origin", "https://app.example", "Access-Control-Request-Method", "POST")
	if r.code != 204 || !strings.Contains(r.h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight of :cancel: %d %v", r.code, r.h)
	}
}

// TestLROObserved: the new routes are counted by route pattern and logged;
// a cancel through :cancel counts as a cancel transition once, not again when
// the operation was already cancelled.
func TestLROObserved(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.Buffer
	e := newEnv(t, func(o *httpapi.Options) {
		o.Metrics = m
		o.AccessLog = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	id, _ := e.mustCreate("acme-rw")
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/requests/" + id + "/operation", 200},
		{"GET", "/v1/operations/" + id, 429}, // the same caller's schedule
		{"POST", "/v1/operations/" + id + ":cancel", 200},
		{"POST", "/v1/operations/" + id + ":cancel", 200},
	} {
		if r := e.call(c.method, c.path, "", e.as("acme-rw")...); r.code != c.want {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.code, r.body)
		}
	}
	cancels := testutil.ToFloat64(m.TransitionCounter(metrics.TransitionCancel, "cancelled"))
	if cancels != 1 {
		t.Errorf("cancel transitions counted %v, want 1", cancels)
	}
	body := scrape(t, reg)
	for _, route := range []string{`route="/v1/requests/:id/operation"`, `route="/v1/operations/:id"`, `route="/v1/operations/:id\\:cancel"`} {
		if !strings.Contains(body, route) {
			t.Errorf("metrics lack %s", route)
		}
	}
	if !strings.Contains(body, `reason="polled_too_early"`) {
		t.Errorf("the 429 of the operation is not counted as polled too early")
	}
	for _, route := range []string{`"route":"/v1/requests/:id/operation"`, `"route":"/v1/operations/:id\\:cancel"`, `"code":"POLLED_TOO_EARLY"`} {
		if !strings.Contains(logs.String(), route) {
			t.Errorf("access log lacks %s:\n%s", route, logs.String())
		}
	}
}

// TestLROAllow: a wrong method on an operation's path answers 405 naming
// what the path takes, in the AIP-193 form.
func TestLROAllow(t *testing.T) {
	e := newEnv(t, nil)
	for path, want := range map[string]string{
		"/v1/operations/" + unknownID:             "DELETE, GET, HEAD",
		"/v1/operations/" + unknownID + ":cancel": "DELETE, GET, HEAD, POST", // also an id to GET and DELETE
		"/v1/operations":                          "GET, HEAD",
	} {
		r := e.call("PUT", path, "", e.as("acme-rw")...)
		wantGoogleError(t, r, 405, "METHOD_NOT_ALLOWED")
		if r.h.Get("Allow") != want {
			t.Errorf("PUT %s: Allow %q, want %q", path, r.h.Get("Allow"), want)
		}
	}
	// An unknown verb is no route of its own: the path is an operation's
	// name with a colon in it, which GET and DELETE take (and find nothing).
	r := e.call("POST", "/v1/operations/"+unknownID+":frobnicate", "", e.as("acme-rw")...)
	wantGoogleError(t, r, 405, "METHOD_NOT_ALLOWED")
	if r.h.Get("Allow") != "DELETE, GET, HEAD" {
		t.Errorf("POST :frobnicate: Allow %q", r.h.Get("Allow"))
	}
	id, _ := e.mustCreate("acme-rw")
	wantGoogleError(t, e.call("GET", "/v1/operations/"+id+":cancel", "", e.as("acme-rw")...), 404, "NOT_FOUND")
	// and the id of a verb route is the id alone
	if r := e.call("POST", "/v1/operations/"+id+":wait", `{"timeout":"0s"}`, e.as("acme-rw")...); r.code != 200 ||
		!strings.Contains(string(r.body), `"name":"operations/`+id+`"`) {
		t.Errorf(":wait: %d %s", r.code, r.body)
	}
}

func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName())
			for _, l := range m.GetLabel() {
				b.WriteString(" " + l.GetName() + "=" + mustQuote(l.GetValue()))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// TestLROViewsOneRoundTrip: a poll of the status monitor or of the Operation
// is one Redis round trip, as a poll of the request (the same read, paced and
// counted in it), by API key and by poll token.
func TestLROViewsOneRoundTrip(t *testing.T) {
	e := newEnv(t, nil)
	c := &testenv.RoundTrips{}
	e.rdb.AddHook(c)
	e.call("GET", "/v1/requests/"+unknownID, "", e.as("acme-r")...) // warms the key cache
	for _, view := range []string{"", "/operation", "operations"} {
		id, tok := e.mustCreate("acme-rw") // each caller's first poll: never early
		path := "/v1/requests/" + id + view
		if view == "operations" {
			path = "/v1/operations/" + id
		}
		for _, cred := range [][]string{e.as("acme-r"), {"X-Poll-Token", tok}} {
			before := c.Trips.Load()
			if r := e.call("GET", path, "", cred...); r.code != 200 {
				t.Fatalf("%s: %d %s", path, r.code, r.body)
			}
			if got := c.Trips.Load() - before; got != 1 {
				t.Errorf("%s by %s: %d Redis round trips, want 1", path, cred[0], got)
			}
		}
	}
}

// TestLRORateLimits: every answer of the new routes to a caller is counted
// under its scope and carries RateLimit-* (docs/reference.md §5), a :wait once; past the
// limit, a Google route answers RESOURCE_EXHAUSTED with Retry-After.
func TestLRORateLimits(t *testing.T) {
	e := newEnv(t, nil)
	lim := &fakeLimiter{left: 7}
	e.srv = e.compose(e.st, time.Second, lim, app.Options{})
	id, tok := e.mustCreate("acme-rw")
	for _, c := range []struct {
		method, path string
		hdr          []string
		scope        string
	}{
		{"GET", "/v1/requests/" + id + "/operation", e.as("acme-r"), "read"},
		{"GET", "/v1/operations/" + id, []string{"X-Poll-Token", tok}, "read"},
		{"GET", "/v1/operations", e.as("acme-r"), "read"},
		{"POST", "/v1/operations/" + id + ":wait", e.as("acme-r"), "read"},
		{"POST", "/v1/operations/" + id + ":cancel", e.as("acme-rw"), "write"},
		{"DELETE", "/v1/operations/" + id, e.as("acme-admin"), "admin"},
	} {
		before := len(lim.calls)
		e.clock.Add(time.Minute)
		r := e.call(c.method, c.path, "", c.hdr...)
		if r.code != 200 || r.h.Get("RateLimit-Limit") != "2" || r.h.Get("RateLimit-Reset") != "7" {
			t.Fatalf("%s %s: %d %v %s", c.method, c.path, r.code, r.h, r.body)
		}
		if len(lim.calls) != before+1 || !strings.HasSuffix(lim.calls[before], "/"+c.scope) {
			t.Fatalf("%s %s: limiter calls %v, want one %s", c.method, c.path, lim.calls[before:], c.scope)
		}
	}
	r := e.call("GET", "/v1/operations", "", e.as("acme-r")...)
	if e := wantGoogleError(t, r, 429, "RATE_LIMITED"); e["status"] != "RESOURCE_EXHAUSTED" || r.h.Get("Retry-After") != "7" {
		t.Fatalf("past the limit: %v %s", r.h, r.body)
	}
}
