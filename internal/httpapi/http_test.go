package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/buildinfo"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/memconn"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// env is a server over a real store on miniredis, with real keys.
type env struct {
	t     testing.TB
	srv   *httpapi.Server
	st    *store.Store
	m     *miniredis.Miniredis
	gone  *atomic.Bool // set before closing m: dials then fail, as to a Redis that went away
	rdb   *redis.Client
	clock *clock
	keys  map[string]string // name -> plain key
	plain []string          // every secret handed out, to scan Redis for
}

type clock = testenv.Clock

func newEnv(t testing.TB, mod func(*httpapi.Options)) *env {
	t.Helper()
	return newAppEnv(t, func(o *app.Options) {
		if mod != nil {
			mod(&o.HTTP)
		}
	})
}

// newAppEnv is newEnv with more of the service (internal/app): mod sees the
// options with the store already in o.Store, and may add the hub, the
// webhooks, ...
func newAppEnv(t testing.TB, mod func(*app.Options)) *env {
	t.Helper()
	m := miniredis.RunT(t)
	// miniredis starts again on the next Dial after Close; a Redis that went
	// away refuses connections instead
	gone := new(atomic.Bool)
	dial := memconn.Dialer(m.Dial)
	rdb := redis.NewClient(&redis.Options{DisableIdentity: true, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if gone.Load() {
			return nil, errors.New("miniredis closed")
		}
		return dial(ctx, network, addr)
	}})
	t.Cleanup(func() { rdb.Close() })
	c := testenv.NewClock(time.Now().UTC())
	st, err := store.New(rdb, store.Options{Now: c.Now, Retention: time.Hour, OpTimeout: 5 * time.Second, EarlyTolerance: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	o := app.Options{Store: st, HTTP: httpapi.Options{Limits: domain.Limits{ContextBytes: 4096, ResultBytes: 16384}, BodyLimitBytes: 64 << 10}}
	if mod != nil {
		mod(&o)
	}
	e := &env{t: t, st: st, m: m, gone: gone, rdb: rdb, clock: c}
	e.srv = e.compose(st, time.Second, nil, o)
	keys := []testenv.TestKey{
		{Name: "acme-rw", Tenant: "acme", Scopes: domain.ScopeRead | domain.ScopeWrite},
		{Name: "acme-r", Tenant: "acme", Scopes: domain.ScopeRead},
		{Name: "acme-w", Tenant: "acme", Scopes: domain.ScopeWrite},
		{Name: "acme-admin", Tenant: "acme", Scopes: domain.ScopeRead | domain.ScopeWrite | domain.ScopeAdmin},
		{Name: "globex-rw", Tenant: "globex", Scopes: domain.ScopeRead | domain.ScopeWrite | domain.ScopeAdmin},
	}
	if e.keys, err = testenv.SaveKeys(context.Background(), st, c.Now(), keys...); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		e.plain = append(e.plain, e.keys[k.Name])
	}
	return e
}

// compose builds the service over st as serve does (internal/app), with an
// authenticator whose key cache lasts cacheTTL on e's clock and the limiter
// lim; it is closed when the test ends. o's Store, Auth and Limiter are
// filled in here.
func (e *env) compose(st *store.Store, cacheTTL time.Duration, lim httpapi.RateLimiter, o app.Options) *httpapi.Server {
	e.t.Helper()
	o.Store, o.Auth, o.Limiter = st, auth.New(st, []byte("0123456789abcdef0123456789abcdef"), cacheTTL, e.clock.Now), lim
	a, err := app.New(o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = a.Close() })
	a.Start(context.Background())
	return a.API()
}

// resp is a decoded answer.
type resp struct {
	code int
	h    http.Header
	body []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not JSON: %v: %s", r.code, err, r.body)
	}
	return m
}

// call sends one request. hdr is alternating names and values.
func (e *env) call(method, path, body string, hdr ...string) resp {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.srv.App().Test(req, -1)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode >= 500 && res.StatusCode != 503 {
		e.t.Fatalf("%s %s answered %d: %s", method, path, res.StatusCode, b)
	}
	return resp{res.StatusCode, res.Header, b}
}

// overNetwork sends one request through a real listener: fasthttp refuses an
// oversized body before Fiber's handlers run, which app.Test does not show.
func (e *env) overNetwork(method, path, body string, hdr ...string) resp {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = e.srv.App().Listener(ln) }()
	defer func() { _ = e.srv.App().Shutdown() }()
	// The server answers 413 after the headers and closes; a client still writing
	// the body may then see a reset instead of the answer. That is a transport
	// race, not an answer: try again a few times.
	var res *http.Response
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		var err error
		if res, err = http.DefaultClient.Do(req); err == nil {
			break
		} else if attempt == 9 {
			e.t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

func (e *env) as(key string) []string { return []string{"Authorization", "Bearer " + e.keys[key]} }

func (e *env) create(key, body string, hdr ...string) resp {
	return e.call("POST", "/v1/requests", body, append(e.as(key), hdr...)...)
}

// mustCreate creates a request and returns its id and poll token.
func (e *env) mustCreate(key string) (string, string) {
	e.t.Helper()
	r := e.create(key, `{"type":"statement.export","context":{"a":1}}`)
	if r.code != 202 {
		e.t.Fatalf("create: %d %s", r.code, r.body)
	}
	m := r.json(e.t)
	return m["id"].(string), m["poll_token"].(string)
}

// unseeable are requests of every kind that an id may name: one of acme, one
// of globex, one deleted and one past its retention (cancelled, then the clock
// moved past the hour of retention), each with its poll token. Only mine is
// acme's to see; the answers for the other three must not tell them apart.
type unseeable struct {
	mine, mineTok, foreign, foreignTok, deleted, deletedTok, expired, expiredTok string
}

func (e *env) unseeable() unseeable {
	e.t.Helper()
	var u unseeable
	u.mine, u.mineTok = e.mustCreate("acme-rw")
	u.foreign, u.foreignTok = e.mustCreate("globex-rw")
	u.deleted, u.deletedTok = e.mustCreate("acme-rw")
	if r := e.call("DELETE", "/v1/requests/"+u.deleted, "", e.as("acme-admin")...); r.code != 204 {
		e.t.Fatal(r.code)
	}
	u.expired, u.expiredTok = e.mustCreate("acme-rw")
	if r := e.call("POST", "/v1/requests/"+u.expired+"/cancel", "", e.as("acme-rw")...); r.code != 200 {
		e.t.Fatal(r.code)
	}
	e.clock.Add(time.Hour + time.Second) // past retention
	return u
}

func wantProblem(t testing.TB, r resp, status int, code string) map[string]any {
	t.Helper()
	if r.code != status {
		t.Fatalf("status %d, want %d: %s", r.code, status, r.body)
	}
	if ct := r.h.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q", ct)
	}
	m := r.json(t)
	if m["code"] != code || m["status"].(float64) != float64(status) || m["type"] == "" || m["title"] == "" || m["instance"] == "" || m["request_id"] == "" || m["detail"] == "" {
		t.Fatalf("problem %s, want code %s", r.body, code)
	}
	return m
}

const refCreate = `{"type":"statement.export","context":{"account":"acc_wealth_881204","tax_year":2025,"delivery_channel":"PORTAL_DOWNLOAD","locale":"en-GB"},"estimated_duration_seconds":180}`

func TestCreate(t *testing.T) {
	e := newEnv(t, nil)
	r := e.create("acme-rw", refCreate, "Host", "status.example:8443")
	if r.code != 202 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	m := r.json(t)
	id := m["id"].(string)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("id %q is not a UUIDv7", id)
	}
	want := "http://status.example:8443/v1/requests/" + id
	if r.h.Get("Location") != want || r.h.Get("Operation-Location") != want+"/operation" {
		t.Fatalf("Location %q Operation-Location %q, want %q and its status monitor", r.h.Get("Location"), r.h.Get("Operation-Location"), want)
	}
	if r.h.Get("Retry-After") != "30" { // 180 s clamped into the default schedule 1..30 s
		t.Fatalf("Retry-After %q", r.h.Get("Retry-After"))
	}
	if m["status"] != "queued" || m["done"] != false || m["version"].(float64) != 1 || m["created_by"] == "" ||
		len(m["poll_token"].(string)) < 40 || m["completed_at"] != nil || r.h.Get("ETag") != `"1"` {
		t.Fatalf("create answer %s", r.body)
	}
	if _, ok := m["result"]; ok {
		t.Fatal("result present on a queued request")
	}
	ca, err := time.Parse(time.RFC3339, m["created_at"].(string))
	if err != nil || !strings.HasSuffix(m["created_at"].(string), "Z") || len(m["created_at"].(string)) != len("2026-11-29T10:00:00.000Z") || ca.IsZero() {
		t.Fatalf("created_at %v", m["created_at"])
	}

	// no estimate: the first step
	r = e.create("acme-rw", `{"type":"x"}`)
	if r.code != 202 || r.h.Get("Retry-After") != "1" {
		t.Fatalf("no estimate: %d Retry-After %q", r.code, r.h.Get("Retry-After"))
	}
}

func TestCreatePublicURL(t *testing.T) {
	e := newEnv(t, func(o *httpapi.Options) { o.PublicURL = "https://api.example.com/status/" })
	r := e.create("acme-rw", `{"type":"x"}`, "Host", "evil.example")
	id := r.json(t)["id"].(string)
	if r.h.Get("Location") != "https://api.example.com/status/v1/requests/"+id {
		t.Fatalf("Location %q", r.h.Get("Location"))
	}
}

func TestCreateValidation(t *testing.T) {
	e := newEnv(t, nil)
	big := `{"type":"x","context":{"pad":"` + strings.Repeat("a", 5000) + `"}}`
	for _, c := range []struct {
		name, body, field string
	}{
		{"MissingType", `{}`, "type"},
		{"BadType", `{"type":"Bad Type"}`, "type"},
		{"TypeNotString", `{"type":5}`, "type"},
		{"UnknownMember", `{"type":"x","colour":"red"}`, "colour"},
		{"ContextNotObject", `{"type":"x","context":[1]}`, "context"},
		{"ContextTooLarge", big, "context"},
		{"EstimateZero", `{"type":"x","estimated_duration_seconds":0}`, "estimated_duration_seconds"},
		{"EstimateTooLarge", `{"type":"x","estimated_duration_seconds":86401}`, "estimated_duration_seconds"},
		{"EstimateFraction", `{"type":"x","estimated_duration_seconds":1.5}`, "estimated_duration_seconds"},
		{"NotJSON", `{"type":`, "body"},
		{"Array", `[]`, "body"},
		{"Trailing", `{"type":"x"} {}`, "body"},
		{"Empty", ``, "body"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr := []string{}
			if c.body == "" {
				hdr = append(hdr, "Content-Type", "application/json")
			}
			m := wantProblem(t, e.create("acme-rw", c.body, hdr...), 400, "VALIDATION_FAILED")
			errs, _ := m["errors"].([]any)
			if len(errs) == 0 || errs[0].(map[string]any)["field"] != c.field {
				t.Fatalf("errors %v, want field %s", m["errors"], c.field)
			}
		})
	}
	wantProblem(t, e.create("acme-rw", `{"type":"x"}`, "Content-Type", "text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE")
	huge := `{"type":"x","context":{"pad":"` + strings.Repeat("a", 70<<10) + `"}}`
	wantProblem(t, e.overNetwork("POST", "/v1/requests", huge, e.as("acme-rw")...), 413, "PAYLOAD_TOO_LARGE")
	for _, k := range e.m.Keys() {
		if strings.Contains(k, ":r:") {
			t.Fatalf("a refused create stored %s", k)
		}
	}
}

func TestIdempotencyKeyHTTP(t *testing.T) {
	e := newEnv(t, nil)
	a := e.create("acme-rw", `{"type":"x"}`, "Idempotency-Key", "abc")
	b := e.create("acme-rw", `{"type":"x"}`, "Idempotency-Key", `"abc"`)
	if a.code != 202 || b.code != 202 {
		t.Fatalf("%d %d", a.code, b.code)
	}
	ma, mb := a.json(t), b.json(t)
	if ma["id"] != mb["id"] || ma["poll_token"] != mb["poll_token"] {
		t.Fatalf("replay changed id or token: %v %v", ma, mb)
	}
	wantProblem(t, e.create("acme-rw", `{"type":"y"}`, "Idempotency-Key", "abc"), 422, "IDEMPOTENCY_KEY_REUSED")
	for _, bad := range []string{strings.Repeat("k", 256), "caf\u00e9", `"unterminated`, `"a"b"`, `""`} {
		m := wantProblem(t, e.create("acme-rw", `{"type":"x"}`, "Idempotency-Key", bad), 400, "VALIDATION_FAILED")
		if m["errors"].([]any)[0].(map[string]any)["field"] != "Idempotency-Key" {
			t.Fatalf("errors %v", m["errors"])
		}
	}
	// a transition with a key: the replay answers 200, not 409
	id := ma["id"].(string)
	body := `{"result_type":"confirmation","result":{"confirmed":true}}`
	r1 := e.call("POST", "/v1/requests/"+id+"/complete", body, append(e.as("acme-rw"), "Idempotency-Key", "c1")...)
	r2 := e.call("POST", "/v1/requests/"+id+"/complete", body, append(e.as("acme-rw"), "Idempotency-Key", "c1")...)
	if r1.code != 200 || r2.code != 200 || !bytes.Equal(r1.body, r2.body) {
		t.Fatalf("transition replay: %d %d\n%s\n%s", r1.code, r2.code, r1.body, r2.body)
	}
	wantProblem(t, e.call("POST", "/v1/requests/"+id+"/complete", body, e.as("acme-rw")...), 409, "ASYNC_REQUEST_ALREADY_TERMINAL")
}

func TestRacingIdempotentCreatesHTTP(t *testing.T) {
	e := newEnv(t, nil)
	var wg sync.WaitGroup
	ids := make([]string, 20)
	codes := make([]int, 20)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.create("acme-rw", `{"type":"x"}`, "Idempotency-Key", "race")
			codes[i] = r.code
			var m map[string]any
			_ = json.Unmarshal(r.body, &m)
			ids[i], _ = m["id"].(string)
		}()
	}
	wg.Wait()
	for i := range ids {
		if codes[i] != 202 || ids[i] != ids[0] {
			t.Fatalf("racer %d: %d %q vs %q", i, codes[i], ids[i], ids[0])
		}
	}
}

func TestPoll(t *testing.T) {
	e := newEnv(t, nil)
	id, tok := e.mustCreate("acme-rw")
	r := e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...)
	if r.code != 200 || r.h.Get("Cache-Control") != "no-store" || r.h.Get("Retry-After") != "1" || r.h.Get("ETag") != `"1"` {
		t.Fatalf("poll: %d %v %s", r.code, r.h, r.body)
	}
	if _, ok := r.json(t)["poll_token"]; ok {
		t.Fatal("poll answers must not repeat the poll token")
	}
	e.clock.Add(time.Second)
	r = e.call("GET", "/v1/requests/"+id, "", append(e.as("acme-r"), "If-None-Match", `"1"`)...)
	if r.code != 304 || len(r.body) != 0 || r.h.Get("ETag") != `"1"` {
		t.Fatalf("If-None-Match: %d %q", r.code, r.body)
	}
	// a poll token polls, with its own pacing
	r = e.call("GET", "/v1/requests/"+id, "", "X-Poll-Token", tok)
	if r.code != 200 {
		t.Fatalf("poll token: %d %s", r.code, r.body)
	}
	r = e.call("GET", "/v1/requests/"+id, "", "X-Poll-Token", tok)
	wantProblem(t, r, 429, "POLLED_TOO_EARLY")
	if r.h.Get("Retry-After") != "1" {
		t.Fatalf("early Retry-After %q", r.h.Get("Retry-After"))
	}
	// events by token
	r = e.call("GET", "/v1/requests/"+id+"/events", "", "X-Poll-Token", tok)
	if r.code != 200 || !strings.Contains(string(r.body), `"to":"queued"`) {
		t.Fatalf("events by token: %d %s", r.code, r.body)
	}
	// a poll token grants nothing else
	wantProblem(t, e.call("POST", "/v1/requests/"+id+"/cancel", "", "X-Poll-Token", tok), 401, "UNAUTHENTICATED")
	wantProblem(t, e.call("DELETE", "/v1/requests/"+id, "", "X-Poll-Token", tok), 401, "UNAUTHENTICATED")
	other, _ := e.mustCreate("acme-rw")
	wantProblem(t, e.call("GET", "/v1/requests/"+other, "", "X-Poll-Token", tok), 404, "NOT_FOUND")
}

func TestTransitionsHTTP(t *testing.T) {
	e := newEnv(t, nil)
	id, _ := e.mustCreate("acme-rw")
	p := "/v1/requests/" + id
	r := e.call("POST", p+"/processing", "", e.as("acme-w")...)
	if r.code != 200 || r.json(t)["status"] != "processing" || r.h.Get("ETag") != `"2"` {
		t.Fatalf("processing: %d %s", r.code, r.body)
	}
	r = e.call("POST", p+"/processing", `{"percent":40,"message":"page 6 of 14"}`, e.as("acme-w")...)
	if m := r.json(t); r.code != 200 || m["version"].(float64) != 3 || m["progress"].(map[string]any)["percent"].(float64) != 40 {
		t.Fatalf("progress: %d %s", r.code, r.body)
	}
	m := wantProblem(t, e.call("POST", p+"/processing", `{"percent":101}`, e.as("acme-w")...), 400, "VALIDATION_FAILED")
	if m["errors"].([]any)[0].(map[string]any)["field"] != "percent" {
		t.Fatal(m)
	}
	for _, bad := range []string{
		`{"result_type":"link","result":{"url":"ftp://x/y","expires_at":"2026-01-01T00:00:00Z"}}`,
		`{"result_type":"link","result":{"url":"https://x/y"}}`,
		`{"result_type":"link","result":{"url":"https://x/y","expires_at":"2026-01-01T00:00:00Z","checksum_sha256":"abc"}}`,
		`{"result_type":"confirmation","result":{"message":"no confirmed"}}`,
		`{"result_type":"answer","result":"string"}`,
		`{"result_type":"answer","result":{"pad":"` + strings.Repeat("x", 17000) + `"}}`,
		`{"result_type":"blob","result":{}}`,
		`{"result_type":"answer"}`,
	} {
		wantProblem(t, e.call("POST", p+"/complete", bad, e.as("acme-w")...), 400, "VALIDATION_FAILED")
	}
	wantProblem(t, e.call("POST", p+"/fail", `{"code":"lower","reason":"x"}`, e.as("acme-w")...), 400, "VALIDATION_FAILED")
	wantProblem(t, e.call("POST", p+"/cancel", `{"reason":"`+strings.Repeat("r", 1025)+`"}`, e.as("acme-w")...), 400, "VALIDATION_FAILED")
	if got := e.call("GET", p, "", e.as("acme-r")...).json(t); got["version"].(float64) != 3 {
		t.Fatalf("refused transitions changed the record: %v", got)
	}

	link := `{"result_type":"link","result":{"url":"https://files.example/x.pdf?sig=1","expires_at":"2026-11-30T10:00:00Z","checksum_sha256":"` + strings.Repeat("ab", 32) + `","size_bytes":1024,"content_type":"application/pdf"}}`
	r = e.call("POST", p+"/complete", link, e.as("acme-w")...)
	m = r.json(t)
	if r.code != 200 || m["status"] != "succeeded" || m["done"] != true || m["result_type"] != "link" ||
		m["result"].(map[string]any)["expires_at"] != "2026-11-30T10:00:00.000Z" || m["completed_at"] == nil || m["expires_at"] == nil {
		t.Fatalf("complete: %d %s", r.code, r.body)
	}
	// terminal: no Retry-After on polls, and 409 with the representation for every transition
	r = e.call("GET", p, "", e.as("acme-r")...)
	if r.h.Get("Retry-After") != "" {
		t.Fatalf("terminal poll carries Retry-After %q", r.h.Get("Retry-After"))
	}
	for _, tr := range []string{"processing", "complete", "fail", "cancel"} {
		body := map[string]string{"complete": `{"result_type":"answer","result":{}}`, "fail": `{"code":"ERR_X"}`}[tr]
		m := wantProblem(t, e.call("POST", p+"/"+tr, body, e.as("acme-w")...), 409, "ASYNC_REQUEST_ALREADY_TERMINAL")
		if rq := m["request"].(map[string]any); rq["status"] != "succeeded" || rq["version"].(float64) != 4 {
			t.Fatalf("409 request member %v", rq)
		}
	}

	id2, _ := e.mustCreate("acme-rw")
	r = e.call("POST", "/v1/requests/"+id2+"/fail", `{"code":"ERR_UPSTREAM","reason":"ledger service unavailable"}`, e.as("acme-w")...)
	if f := r.json(t)["failure"].(map[string]any); r.code != 200 || f["code"] != "ERR_UPSTREAM" || f["reason"] != "ledger service unavailable" {
		t.Fatalf("fail: %d %s", r.code, r.body)
	}
	id3, _ := e.mustCreate("acme-rw")
	r = e.call("POST", "/v1/requests/"+id3+"/cancel", "", e.as("acme-w")...)
	if r.code != 200 || r.json(t)["status"] != "cancelled" {
		t.Fatalf("cancel: %d %s", r.code, r.body)
	}
	r = e.call("GET", "/v1/requests/"+id3+"/events", "", e.as("acme-r")...)
	var ev struct {
		Items []map[string]any `json:"items"`
	}
	_ = json.Unmarshal(r.body, &ev)
	if len(ev.Items) != 2 || ev.Items[0]["from"] != nil || ev.Items[1]["from"] != "queued" || ev.Items[1]["to"] != "cancelled" || ev.Items[1]["seq"].(float64) != 2 {
		t.Fatalf("events %s", r.body)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, nil)
	id, _ := e.mustCreate("acme-rw")
	for _, h := range [][]string{
		{},
		{"Authorization", "Bearer nope"},
		{"Authorization", "Basic dXNlcjpwYXNz"},
		{"Authorization", "Bearer " + e.keys["acme-rw"][:len(e.keys["acme-rw"])-1] + "x"},
	} {
		r := e.call("GET", "/v1/requests/"+id, "", h...)
		wantProblem(t, r, 401, "UNAUTHENTICATED")
		if !strings.HasPrefix(r.h.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("WWW-Authenticate %q", r.h.Get("WWW-Authenticate"))
		}
	}
	wantProblem(t, e.create("acme-r", `{"type":"x"}`), 403, "FORBIDDEN")
	wantProblem(t, e.call("GET", "/v1/requests/"+id, "", e.as("acme-w")...), 403, "FORBIDDEN")
	wantProblem(t, e.call("DELETE", "/v1/requests/"+id, "", e.as("acme-rw")...), 403, "FORBIDDEN")
	if r := e.call("DELETE", "/v1/requests/"+id, "", e.as("acme-admin")...); r.code != 204 || len(r.body) != 0 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	wantProblem(t, e.call("GET", "/v1/requests/"+id, "", e.as("acme-admin")...), 404, "NOT_FOUND")
}

func TestRevokedKeyStopsWithinCacheTTL(t *testing.T) {
	e := newEnv(t, nil)
	id, _ := e.mustCreate("acme-rw")
	key := e.keys["acme-r"]
	if r := e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...); r.code != 200 {
		t.Fatal(r.code)
	}
	keyID := "key_" + key[4:20]
	if err := e.st.RevokeKey(context.Background(), keyID); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(1100 * time.Millisecond) // the cache TTL of this env is 1 s
	wantProblem(t, e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...), 401, "UNAUTHENTICATED")
}

// TestNotFoundIsUniform: every id a caller may not see answers the same bytes,
// apart from instance and request_id.
func TestNotFoundIsUniform(t *testing.T) {
	e := newEnv(t, nil)
	u := e.unseeable()
	mine, tok, foreign, deleted, expired := u.mine, u.mineTok, u.foreign, u.deleted, u.expired
	var bodies []string
	add := func(r resp) {
		t.Helper()
		wantProblem(t, r, 404, "NOT_FOUND")
		m := r.json(t)
		s := strings.Replace(string(r.body), `"instance":`+mustQuote(m["instance"].(string)), `"instance":""`, 1)
		s = strings.Replace(s, `"request_id":`+mustQuote(m["request_id"].(string)), `"request_id":""`, 1)
		bodies = append(bodies, s)
	}
	for _, id := range []string{foreign, "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", "not-a-uuid", deleted, expired} {
		add(e.call("GET", "/v1/requests/"+id, "", e.as("acme-rw")...))
		add(e.call("GET", "/v1/requests/"+id+"/events", "", e.as("acme-rw")...))
		add(e.call("POST", "/v1/requests/"+id+"/cancel", "", e.as("acme-rw")...))
		add(e.call("DELETE", "/v1/requests/"+id, "", e.as("acme-admin")...))
	}
	add(e.call("GET", "/v1/requests/"+mine, "", "X-Poll-Token", tok+"x"))
	add(e.call("GET", "/v1/requests/"+mine, "", "X-Poll-Token", "acme.AAAA"))
	add(e.call("GET", "/v1/requests/"+foreign, "", "X-Poll-Token", tok))
	for i, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("404 body %d differs:\n%s\n%s", i, b, bodies[0])
		}
	}
}

func mustQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestFrozenTenantHTTP(t *testing.T) {
	e := newEnv(t, nil)
	id, tok := e.mustCreate("acme-rw")
	if err := e.st.SetFrozen(context.Background(), "acme", true); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...), 403, "TENANT_FROZEN")
	wantProblem(t, e.call("GET", "/v1/requests/"+id, "", "X-Poll-Token", tok), 403, "TENANT_FROZEN")
	wantProblem(t, e.call("GET", "/v1/requests/"+id+"/events", "", e.as("acme-r")...), 403, "TENANT_FROZEN")
	wantProblem(t, e.create("acme-rw", `{"type":"x"}`), 403, "TENANT_FROZEN")
	if r := e.call("POST", "/v1/requests/"+id+"/complete", `{"result_type":"answer","result":{"ok":true}}`, e.as("acme-rw")...); r.code != 200 {
		t.Fatalf("transition of a frozen tenant: %d %s", r.code, r.body)
	}
	if r := e.create("globex-rw", `{"type":"x"}`); r.code != 202 {
		t.Fatalf("other tenants are not frozen: %d", r.code)
	}
	if err := e.st.SetFrozen(context.Background(), "acme", false); err != nil {
		t.Fatal(err)
	}
	r := e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...)
	if r.code != 200 || r.json(t)["status"] != "succeeded" {
		t.Fatalf("after unfreeze: %d %s", r.code, r.body)
	}
}

func TestRoutesAndHealth(t *testing.T) {
	e := newEnv(t, nil)
	if r := e.call("GET", "/healthz", ""); r.code != 200 {
		t.Fatal(r.code)
	}
	if r := e.call("GET", "/livez", ""); r.code != 200 || r.json(t)["status"] != "ok" {
		t.Fatal("livez", r.code, string(r.body))
	}
	// GET / points at the API's description and the docs, without a credential.
	if r := e.call("GET", "/", ""); r.code != 200 || r.json(t)["openapi"] != "/openapi.json" ||
		r.json(t)["docs"] != httpapi.DocsURL || r.json(t)["service"] != "asyncstatus" {
		t.Fatal("GET /", r.code, string(r.body))
	}
	if r := e.call("GET", "/readyz", ""); r.code != 200 {
		t.Fatal(r.code, string(r.body))
	}
	wantProblem(t, e.call("GET", "/nope", ""), 404, "NOT_FOUND")
	wantProblem(t, e.call("PUT", "/v1/requests/x", ""), 405, "METHOD_NOT_ALLOWED")
	r := e.call("GET", "/healthz", "", "X-Request-Id", "trace-123")
	if r.h.Get("X-Request-Id") != "trace-123" {
		t.Fatalf("X-Request-Id %q", r.h.Get("X-Request-Id"))
	}
	e.gone.Store(true)
	e.m.Close() // Redis gone: readiness fails, liveness holds, reads answer 503
	r = e.call("GET", "/readyz", "")
	wantProblem(t, r, 503, "BACKEND_UNAVAILABLE")
	if r.h.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if r := e.call("GET", "/healthz", ""); r.code != 200 {
		t.Fatal(r.code)
	}
	if r := e.call("GET", "/livez", ""); r.code != 200 {
		t.Fatal("livez with Redis down", r.code)
	}
}

// TestNoSecretAtRest scans every Redis key and value for the plain API keys and
// poll tokens handed out.
func TestNoSecretAtRest(t *testing.T) {
	e := newEnv(t, nil)
	secrets := append([]string{}, e.plain...)
	for range 3 {
		r := e.create("acme-rw", `{"type":"x"}`, "Idempotency-Key", "k")
		secrets = append(secrets, r.json(t)["poll_token"].(string))
		id := r.json(t)["id"].(string)
		e.call("GET", "/v1/requests/"+id, "", "X-Poll-Token", r.json(t)["poll_token"].(string))
	}
	var dump strings.Builder
	for _, k := range e.m.Keys() {
		dump.WriteString(k + "\n")
		switch e.m.Type(k) {
		case "hash":
			fields, _ := e.m.HKeys(k)
			for _, f := range fields {
				dump.WriteString(f + "=" + e.m.HGet(k, f) + "\n")
			}
		case "string":
			v, _ := e.m.Get(k)
			dump.WriteString(v + "\n")
		case "set":
			v, _ := e.m.Members(k)
			dump.WriteString(strings.Join(v, "\n"))
		case "zset":
			v, _ := e.m.ZMembers(k)
			dump.WriteString(strings.Join(v, "\n"))
		}
	}
	for _, s := range secrets {
		for _, part := range []string{s, s[len(s)-20:]} {
			if strings.Contains(dump.String(), part) {
				t.Fatalf("secret %q stored in plain form", part)
			}
		}
	}
}

// fakeLimiter allows n calls, then refuses.
type fakeLimiter struct {
	mu    sync.Mutex
	left  int
	calls []string
}

func (f *fakeLimiter) Allow(ctx context.Context, tenant, keyID, scope string) ratelimit.Decision {
	d, _ := f.Count(ctx, tenant, keyID, scope)
	return d
}

func (f *fakeLimiter) Count(_ context.Context, tenant, keyID, scope string) (ratelimit.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, tenant+"/"+keyID+"/"+scope)
	f.left--
	// RateLimit-Reset 7: the HTTP layer rounds the seconds left up
	d := ratelimit.Decision{Allowed: true, Limit: 2, Remaining: int64(max(f.left, 0)), Reset: time.Now().Add(6500 * time.Millisecond)}
	if f.left < 0 {
		d.Allowed, d.RetryAfter = false, 7*time.Second
	}
	return d, nil
}

func TestRateLimitHeaders(t *testing.T) {
	e := newEnv(t, nil)
	lim := &fakeLimiter{left: 2}
	e.srv = e.compose(e.st, time.Second, lim, app.Options{})
	r := e.create("acme-rw", `{"type":"x"}`)
	if r.code != 202 || r.h.Get("RateLimit-Limit") != "2" || r.h.Get("RateLimit-Remaining") != "1" || r.h.Get("RateLimit-Reset") != "7" {
		t.Fatalf("allowed answer: %d %v", r.code, r.h)
	}
	id := r.json(t)["id"].(string)
	if r := e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...); r.code != 200 || r.h.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("second: %d %v", r.code, r.h)
	}
	r = e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...)
	wantProblem(t, r, 429, "RATE_LIMITED")
	if r.h.Get("Retry-After") != "7" || r.h.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("refused answer headers %v", r.h)
	}
	if len(lim.calls) != 3 || !strings.HasSuffix(lim.calls[0], "/write") || !strings.HasSuffix(lim.calls[1], "/read") || !strings.HasPrefix(lim.calls[1], "acme/key_") {
		t.Fatalf("limiter calls %v", lim.calls)
	}
	// unauthenticated calls are not counted
	e.call("GET", "/v1/requests/"+id, "")
	if len(lim.calls) != 3 {
		t.Fatal("an unauthenticated call was counted")
	}
}

// TestRequestIDs: an id the service makes is 24 lowercase hex digits, new for
// every request, and the same in the header and in a problem body; an
// insane X-Request-Id is replaced.
func TestRequestIDs(t *testing.T) {
	e := newEnv(t, nil)
	hex24 := regexp.MustCompile(`^[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for range 50 {
		id := e.call("GET", "/healthz", "").h.Get("X-Request-Id")
		if !hex24.MatchString(id) || seen[id] {
			t.Fatalf("request id %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
	r := e.call("GET", "/nope", "", "X-Request-Id", "bad id with spaces")
	wantProblem(t, r, 404, "NOT_FOUND")
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatal(err)
	}
	if id := r.h.Get("X-Request-Id"); !hex24.MatchString(id) || m["request_id"] != id {
		t.Fatalf("header %q, body %v", id, m["request_id"])
	}
}

// TestHealthzNamesTheBuild: /healthz answers the build it was given, so that an
// operator sees which code each replica runs.
func TestHealthzNamesTheBuild(t *testing.T) {
	b := buildinfo.Info{Version: "0.1.0", Revision: "4d44921bb32d", Modified: true, GoVersion: "go1.26.8"}
	e := newEnv(t, func(o *httpapi.Options) { o.Build = b })
	r := e.call("GET", "/healthz", "")
	got := r.json(t)
	if r.code != 200 || got["status"] != "ok" || got["version"] != "0.1.0" || got["revision"] != "4d44921bb32d" ||
		got["modified"] != true || got["go_version"] != "go1.26.8" {
		t.Fatalf("/healthz: %d %v", r.code, got)
	}
}

// TestMetricsElsewhere: with /metrics on a listener of its own
// (metrics.addr), the API's listener no longer serves it.
func TestMetricsElsewhere(t *testing.T) {
	if r := newEnv(t, nil).call("GET", "/metrics", ""); r.code != 200 {
		t.Fatalf("/metrics by default: %d", r.code)
	}
	e := newEnv(t, func(o *httpapi.Options) { o.MetricsElsewhere = true })
	wantProblem(t, e.call("GET", "/metrics", ""), 404, "NOT_FOUND")
}
