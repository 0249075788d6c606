package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// failoverCluster is a Cluster of the test's own, which it may fail over,
// and the backend of its clients (quick to see the new topology).
func failoverCluster(t *testing.T) (*testenv.ClusterProcs, testenv.Backend) {
	c := testenv.StartCluster(t)
	return c, testenv.Backend{Name: "private-cluster", Client: func(tb testing.TB) redis.UniversalClient {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: 500 * time.Millisecond})
		tb.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}, AutoPipeline: true}
}

// replicaPair is two servers (replicas) over one Redis, each with its own
// store and notification hub, listening on loopback TCP: a wait held by one
// is woken by a transition made through the other.
type replicaPair struct {
	t           testing.TB
	a, b        *httpapi.Server
	urlA, urlB  string
	key, reader string       // plain API keys of tenant acme: read+write+admin, and read only
	st          *store.Store // replica a's store
}

var pollSecretForTests = []byte("0123456789abcdef0123456789abcdef")

func newReplicaPair(t testing.TB, be testenv.Backend, mod func(*app.Options), smod func(*store.Options)) *replicaPair {
	t.Helper()
	rdb := be.Client(t)
	prefix := testenv.Isolate(t)
	p := &replicaPair{t: t}
	var first *store.Store
	for i := range 2 {
		so := store.Options{Prefix: prefix, OpTimeout: 2 * time.Second, Retention: time.Hour, Schedule: []int{1, 2, 5},
			EarlyTolerance: 0.2, AutoPipeline: be.AutoPipeline}
		if smod != nil {
			smod(&so)
		}
		st, err := store.New(rdb, so)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first, p.st = st, st
		}
		srv, url := serveWaits(t, st, time.Second, mod)
		if i == 0 {
			p.a, p.urlA = srv, url
		} else {
			p.b, p.urlB = srv, url
		}
	}
	for _, k := range []struct {
		dst    *string
		scopes domain.Scopes
	}{{&p.key, domain.ScopeRead | domain.ScopeWrite | domain.ScopeAdmin}, {&p.reader, domain.ScopeRead}} {
		plain, key, err := auth.NewKey("acme", k.scopes, "k", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := first.SaveKey(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		*k.dst = plain
	}
	return p
}

// serveWaits serves the service over st on loopback TCP as serve composes it
// (internal/app), with a notification hub, waits of up to 30s and an
// authenticator whose key cache lasts cacheTTL; mod, when set, changes the
// options. It is closed when the test ends.
func serveWaits(t testing.TB, st *store.Store, cacheTTL time.Duration, mod func(*app.Options)) (*httpapi.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := app.Options{Store: st, Auth: auth.New(st, pollSecretForTests, cacheTTL, nil), Listener: ln, Waits: &store.HubOptions{},
		HTTP: httpapi.Options{Wait: httpapi.WaitOptions{Max: 30 * time.Second, MaxWaiters: 100,
			Heartbeat: 100 * time.Millisecond, StreamMax: time.Minute, ReadTimeout: 2 * time.Second},
			ReadTimeout: time.Second, WriteTimeout: time.Second, IdleTimeout: 5 * time.Second}}
	if mod != nil {
		mod(&o)
	}
	a, err := app.New(o)
	if err != nil {
		t.Fatal(err)
	}
	a.Start(context.Background())
	t.Cleanup(func() { _ = a.Close() })
	return a.API(), "http://" + ln.Addr().String()
}

// httpResp is one answer read whole.
type httpResp struct {
	code int
	h    http.Header
	body []byte
}

func (r httpResp) request(t testing.TB) domain.Request {
	t.Helper()
	var v domain.Request
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("answer %d: %v: %s", r.code, err, r.body)
	}
	return v
}

// do sends a request; hdr alternates names and values. The client gives up
// after limit: a wait that is not woken fails the test rather than pass by
// timing out into the same state.
func do(t testing.TB, method, url, body string, limit time.Duration, hdr ...string) httpResp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
		return httpResp{}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, url, err)
	}
	return httpResp{res.StatusCode, res.Header, b}
}

func (p *replicaPair) create(t testing.TB) (id, token string) {
	t.Helper()
	r := do(t, "POST", p.urlB+"/v1/requests", `{"type":"export"}`, 5*time.Second, "Authorization", "Bearer "+p.key)
	if r.code != 202 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	var m map[string]any
	_ = json.Unmarshal(r.body, &m)
	return m["id"].(string), m["poll_token"].(string)
}

// transition makes a transition through replica b.
func (p *replicaPair) transition(t testing.TB, id, what, body string) {
	t.Helper()
	r := do(t, "POST", p.urlB+"/v1/requests/"+id+"/"+what, body, 5*time.Second, "Authorization", "Bearer "+p.key)
	if r.code != 200 {
		t.Fatalf("%s: %d %s", what, r.code, r.body)
	}
}

func waitBackends(t *testing.T, f func(t *testing.T, be testenv.Backend)) {
	for _, be := range testenv.Backends() {
		t.Run(be.Name, func(t *testing.T) { f(t, be) })
	}
	t.Run("sentinel", func(t *testing.T) { f(t, testenv.SentinelBackend(t)) })
}

// waitWaiting waits until srv holds n waits; a wait that is not held in 10s
// fails the test.
func waitWaiting(t testing.TB, srv *httpapi.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waits held, want %d", srv.Waiting(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// later runs f after d in the background; the test waits for it.
func later(t *testing.T, d time.Duration, f func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); time.Sleep(d); f() }()
	t.Cleanup(wg.Wait)
}

func TestLongPoll(t *testing.T) {
	waitBackends(t, func(t *testing.T, be testenv.Backend) {
		p := newReplicaPair(t, be, nil, nil)
		auth := []string{"Authorization", "Bearer " + p.key}
		id, tok := p.create(t)
		url := p.urlA + "/v1/requests/" + id

		t.Run("WokenByTheOtherReplica", func(t *testing.T) {
			later(t, 200*time.Millisecond, func() { p.transition(t, id, "processing", `{"percent":10}`) })
			r := do(t, "GET", url, "", 10*time.Second, append(auth, "Prefer", "wait=25")...)
			got := r.request(t)
			if r.code != 200 || got.Version != 2 || got.Status != domain.StatusProcessing {
				t.Fatalf("%d %s", r.code, r.body)
			}
			if r.h.Get("Preference-Applied") != "wait=25" || r.h.Get("Retry-After") != "0" || r.h.Get("ETag") != `"2"` {
				t.Fatalf("headers %v", r.h)
			}
		})
		t.Run("HeartbeatWakesAnIfNoneMatch", func(t *testing.T) {
			later(t, 200*time.Millisecond, func() { p.transition(t, id, "processing", "") })
			r := do(t, "GET", url, "", 10*time.Second, append(auth, "Prefer", "wait=25", "If-None-Match", `"2"`)...)
			if r.code != 200 || r.request(t).Version != 3 {
				t.Fatalf("%d %s", r.code, r.body)
			}
		})
		t.Run("TimesOutUnchanged", func(t *testing.T) {
			r := do(t, "GET", url, "", 10*time.Second, append(auth, "Prefer", "wait=1")...)
			if r.code != 200 || r.request(t).Version != 3 || r.h.Get("Preference-Applied") != "wait=1" || r.h.Get("Retry-After") != "0" {
				t.Fatalf("%d %v %s", r.code, r.h, r.body)
			}
			r = do(t, "GET", url, "", 10*time.Second, append(auth, "Prefer", "wait=1", "If-None-Match", `"3"`)...)
			if r.code != 304 || len(r.body) != 0 || r.h.Get("Preference-Applied") != "wait=1" || r.h.Get("Retry-After") != "0" {
				t.Fatalf("%d %v %s", r.code, r.h, r.body)
			}
		})
		t.Run("StaleETagAnswersAtOnce", func(t *testing.T) {
			r := do(t, "GET", url, "", 5*time.Second, append(auth, "Prefer", "wait=25", "If-None-Match", `"1"`)...)
			if r.code != 200 || r.request(t).Version != 3 || r.h.Get("Preference-Applied") != "wait=25" {
				t.Fatalf("%d %s", r.code, r.body)
			}
		})
		t.Run("NeverPolledTooEarly", func(t *testing.T) {
			r := do(t, "GET", url, "", 5*time.Second, auth...) // an ordinary poll: Retry-After 1
			if r.code != 200 || r.h.Get("Retry-After") == "0" {
				t.Fatalf("%d %v", r.code, r.h)
			}
			for range 2 {
				r = do(t, "GET", url, "", 5*time.Second, append(auth, "Prefer", "wait=1", "If-None-Match", `"3"`)...)
				if r.code != 304 {
					t.Fatalf("%d %s", r.code, r.body)
				}
			}
		})
		t.Run("PollTokenAndClamp", func(t *testing.T) {
			later(t, 200*time.Millisecond, func() {
				p.transition(t, id, "complete", `{"result_type":"confirmation","result":{"confirmed":true}}`)
			})
			r := do(t, "GET", url, "", 10*time.Second, "X-Poll-Token", tok, "Prefer", "respond-async, WAIT=999; x=y")
			got := r.request(t)
			if r.code != 200 || got.Status != domain.StatusSucceeded || r.h.Get("Preference-Applied") != "wait=30" || r.h.Get("Retry-After") != "" {
				t.Fatalf("%d %v %s", r.code, r.h, r.body)
			}
		})
		t.Run("TerminalAnswersAtOnce", func(t *testing.T) {
			r := do(t, "GET", url, "", 5*time.Second, append(auth, "Prefer", "wait=25", "If-None-Match", `"4"`)...)
			if r.code != 304 || r.h.Get("Preference-Applied") != "wait=25" || r.h.Get("Retry-After") != "" {
				t.Fatalf("%d %v", r.code, r.h)
			}
		})
		t.Run("ErrorsAreAPollsErrors", func(t *testing.T) {
			for _, u := range []string{p.urlA + "/v1/requests/not-a-uuid", p.urlA + "/v1/requests/01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a"} {
				if r := do(t, "GET", u, "", 5*time.Second, append(auth, "Prefer", "wait=5")...); r.code != 404 {
					t.Fatalf("%s: %d", u, r.code)
				}
			}
			if r := do(t, "GET", url, "", 5*time.Second, "Prefer", "wait=5"); r.code != 401 {
				t.Fatalf("no credential: %d", r.code)
			}
		})
		t.Run("DeleteEndsTheWait", func(t *testing.T) {
			id2, _ := p.create(t)
			later(t, 200*time.Millisecond, func() {
				if r := do(t, "DELETE", p.urlB+"/v1/requests/"+id2, "", 5*time.Second, auth...); r.code != 204 {
					t.Errorf("delete: %d", r.code)
				}
			})
			if r := do(t, "GET", p.urlA+"/v1/requests/"+id2, "", 10*time.Second, append(auth, "Prefer", "wait=25")...); r.code != 404 {
				t.Fatalf("%d %s", r.code, r.body)
			}
		})
	})
}

// TestLongPollCap: past wait.max_waiters a long poll is an ordinary paced
// poll, without Preference-Applied, and never a 5xx.
func TestLongPollCap(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[1], func(o *app.Options) { o.HTTP.Wait.MaxWaiters = 1 }, nil)
	auth := []string{"Authorization", "Bearer " + p.key}
	id, _ := p.create(t)
	url := p.urlA + "/v1/requests/" + id
	held := make(chan httpResp, 1)
	go func() { held <- do(t, "GET", url, "", 10*time.Second, append(auth, "Prefer", "wait=25")...) }()
	waitWaiting(t, p.a, 1)
	r := do(t, "GET", url, "", 5*time.Second, append(auth, "Prefer", "wait=25")...)
	if r.code != 200 || r.h.Get("Preference-Applied") != "" || r.h.Get("Retry-After") != "1" {
		t.Fatalf("over the cap: %d %v", r.code, r.h)
	}
	p.transition(t, id, "processing", "")
	if r := <-held; r.code != 200 || r.request(t).Version != 2 {
		t.Fatalf("held: %d %s", r.code, r.body)
	}
}

// TestLongPollCountsOnceAgainstTheRateLimit: a woken wait reads Redis twice
// or more, but the read rate limit counts it once.
func TestLongPollCountsOnceAgainstTheRateLimit(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[1], nil,
		func(o *store.Options) {
			o.RateLimits = &ratelimit.Rates{Read: ratelimit.Rate{Limit: 1000, Period: time.Hour}, Tenant: ratelimit.Rate{Limit: 10000, Period: time.Hour}}
		})
	auth := []string{"Authorization", "Bearer " + p.reader}
	id, _ := p.create(t)
	url := p.urlA + "/v1/requests/" + id
	later(t, 200*time.Millisecond, func() { p.transition(t, id, "processing", "") })
	r1 := do(t, "GET", url, "", 10*time.Second, append(auth, "Prefer", "wait=25")...)
	r2 := do(t, "GET", url, "", 10*time.Second, append(auth, "Prefer", "wait=1")...)
	if r1.h.Get("RateLimit-Remaining") != "999" || r2.h.Get("RateLimit-Remaining") != "998" {
		t.Fatalf("remaining %q then %q, want 999 then 998", r1.h.Get("RateLimit-Remaining"), r2.h.Get("RateLimit-Remaining"))
	}
}

// TestStopWaitsAnswersEveryWait is SIGTERM's first step: every held wait
// answers at once with the current state, every stream ends.
func TestStopWaitsAnswersEveryWait(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[1], nil, nil)
	auth := []string{"Authorization", "Bearer " + p.key}
	const n = 20
	answers := make(chan httpResp, n+1)
	for range n {
		id, _ := p.create(t)
		go func() {
			answers <- do(t, "GET", p.urlA+"/v1/requests/"+id, "", 10*time.Second, append(auth, "Prefer", "wait=25")...)
		}()
	}
	id, _ := p.create(t)
	go func() { answers <- do(t, "GET", p.urlA+"/v1/requests/"+id+"/stream", "", 10*time.Second, auth...) }()
	waitWaiting(t, p.a, n+1)
	p.a.StopWaits()
	for range n + 1 {
		r := <-answers
		if r.code != 200 {
			t.Fatalf("%d %s", r.code, r.body)
		}
		if r.h.Get("Content-Type") != "text/event-stream" && r.request(t).Version != 1 {
			t.Fatalf("%s", r.body)
		}
	}
	// and a new long poll is an ordinary poll now
	if r := do(t, "GET", p.urlA+"/v1/requests/"+id, "", 5*time.Second, append(auth, "Prefer", "wait=25")...); r.code != 200 || r.h.Get("Preference-Applied") != "" {
		t.Fatalf("after StopWaits: %d %v", r.code, r.h)
	}
}

// TestDepartedClientFreesItsSlot: a long poll or stream whose client closed
// the connection gives its slot back within about a heartbeat (100ms here).
func TestDepartedClientFreesItsSlot(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[1], nil, nil)
	for _, path := range []string{"", "/stream"} {
		id, _ := p.create(t)
		conn, err := net.Dial("tcp", strings.TrimPrefix(p.urlA, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /v1/requests/%s%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nPrefer: wait=25\r\n\r\n", id, path, p.key)
		deadline := time.Now().Add(5 * time.Second)
		for p.a.Waiting() != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("%q: the wait was not held", path)
			}
			time.Sleep(10 * time.Millisecond)
		}
		conn.Close()
		for p.a.Waiting() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%q: the wait of a departed client still held after 5s", path)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// sseEvent is one event of a stream.
type sseEvent struct{ id, event, data string }

// field takes an id, event or data line of an event stream into e; false
// for any other line.
func (e *sseEvent) field(line string) bool {
	switch {
	case strings.HasPrefix(line, "id: "):
		e.id = line[4:]
	case strings.HasPrefix(line, "event: "):
		e.event = line[7:]
	case strings.HasPrefix(line, "data: "):
		e.data = line[6:]
	default:
		return false
	}
	return true
}

// readEvents reads a stream's events until it ends, after checking its
// retry line.
func readEvents(t testing.TB, res *http.Response) []sseEvent {
	t.Helper()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []sseEvent
	var cur sseEvent
	first := true
	for sc.Scan() {
		line := sc.Text()
		if first {
			if line != "retry: 2000" {
				t.Fatalf("first line %q", line)
			}
			first = false
			continue
		}
		switch {
		case line == "":
			if cur != (sseEvent{}) {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case !cur.field(line):
			t.Fatalf("unexpected line %q", line)
		}
	}
	return out
}

func openStream(t testing.TB, url string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestStream(t *testing.T) {
	waitBackends(t, func(t *testing.T, be testenv.Backend) {
		p := newReplicaPair(t, be, nil, nil)
		id, tok := p.create(t)
		res := openStream(t, p.urlA+"/v1/requests/"+id+"/stream?poll_token="+tok)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" ||
			res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("%d %v", res.StatusCode, res.Header)
		}
		later(t, 300*time.Millisecond, func() {
			p.transition(t, id, "processing", `{"percent":50}`)
			p.transition(t, id, "processing", `{"percent":90}`)
			p.transition(t, id, "fail", `{"code":"ERR_X","reason":"x"}`)
		})
		evs := readEvents(t, res) // ends after the terminal event
		if len(evs) < 2 || evs[0].id != "1" || evs[len(evs)-1].id != "4" {
			t.Fatalf("events %+v", evs)
		}
		prev := 0
		for _, e := range evs {
			var r domain.Request
			if e.event != "request" || json.Unmarshal([]byte(e.data), &r) != nil || fmt.Sprint(r.Version) != e.id || int(r.Version) <= prev {
				t.Fatalf("event %+v", e)
			}
			prev = int(r.Version)
		}
		if !strings.Contains(evs[len(evs)-1].data, `"status":"failed"`) {
			t.Fatalf("last %+v", evs[len(evs)-1])
		}
		// resuming at the terminal version: 204, which stops EventSource
		if r := do(t, "GET", p.urlA+"/v1/requests/"+id+"/stream", "", 5*time.Second, "X-Poll-Token", tok, "Last-Event-ID", "4"); r.code != 204 {
			t.Fatalf("resume at the end: %d %s", r.code, r.body)
		}
		// resuming earlier: the current state at once
		res = openStream(t, p.urlA+"/v1/requests/"+id+"/stream", "Authorization", "Bearer "+p.key, "Last-Event-ID", "2")
		if evs := readEvents(t, res); len(evs) != 1 || evs[0].id != "4" {
			t.Fatalf("resumed: %+v", evs)
		}
		// Last-Event-ID at the current version: no event until the next change
		id2, tok2 := p.create(t)
		res = openStream(t, p.urlA+"/v1/requests/"+id2+"/stream?poll_token="+tok2, "Last-Event-ID", "1")
		later(t, 300*time.Millisecond, func() { p.transition(t, id2, "cancel", "") })
		if evs := readEvents(t, res); len(evs) != 1 || evs[0].id != "2" {
			t.Fatalf("from Last-Event-ID 1: %+v", evs)
		}
		// errors are a poll's; the query token works on this route only
		for _, c := range []struct {
			url  string
			code int
		}{
			{p.urlA + "/v1/requests/" + id2 + "/stream", 401},
			{p.urlA + "/v1/requests/" + id2 + "/stream?poll_token=" + tok, 404},
			{p.urlA + "/v1/requests/" + id2 + "?poll_token=" + tok2, 401},
			{p.urlA + "/v1/requests/" + id2 + "/events?poll_token=" + tok2, 401},
		} {
			r := do(t, "GET", c.url, "", 5*time.Second)
			if r.code != c.code || r.h.Get("Content-Type") != "application/problem+json" || strings.Contains(string(r.body), "poll_token=") {
				t.Fatalf("%s: %d %s", c.url, r.code, r.body)
			}
		}
		// a deleted request ends its stream
		id3, _ := p.create(t)
		res = openStream(t, p.urlA+"/v1/requests/"+id3+"/stream", "Authorization", "Bearer "+p.key)
		later(t, 300*time.Millisecond, func() {
			do(t, "DELETE", p.urlB+"/v1/requests/"+id3, "", 5*time.Second, "Authorization", "Bearer "+p.key)
		})
		if evs := readEvents(t, res); len(evs) != 1 {
			t.Fatalf("deleted: %+v", evs)
		}
	})
}

// TestStreamKeepAliveAndMax: a comment every heartbeat, and the stream ends
// after wait.stream_max.
func TestStreamKeepAliveAndMax(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[1], func(o *app.Options) { o.HTTP.Wait.StreamMax = 700 * time.Millisecond }, nil)
	id, _ := p.create(t)
	res := openStream(t, p.urlA+"/v1/requests/"+id+"/stream", "Authorization", "Bearer "+p.key)
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), ": keep-alive\n\n"); n < 2 || !strings.Contains(string(b), "id: 1\n") {
		t.Fatalf("%d keep-alives in %q", n, b)
	}
}

// TestWaitsAcrossARedisRestart: held waits end when Redis restarts (here
// empty, so the request is gone: 404), never with a 5xx other than 503, and
// waiting works again afterwards.
func TestWaitsAcrossARedisRestart(t *testing.T) {
	proc := testenv.StartRedisProcess(t)
	be := testenv.Backend{Name: "own", Client: func(tb testing.TB) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: proc.Addr()})
		tb.Cleanup(func() { _ = c.Close() })
		return c
	}, AutoPipeline: true}
	p := newReplicaPair(t, be, nil, nil)
	auth := []string{"Authorization", "Bearer " + p.key}
	const n = 5
	answers := make(chan httpResp, n)
	for range n {
		id, _ := p.create(t)
		go func() {
			answers <- do(t, "GET", p.urlA+"/v1/requests/"+id, "", 20*time.Second, append(auth, "Prefer", "wait=25")...)
		}()
	}
	waitWaiting(t, p.a, n)
	proc.Restart()
	for range n {
		if r := <-answers; r.code != 404 && r.code != 503 {
			t.Fatalf("%d %s", r.code, r.body)
		}
	}
}

// TestCORS: docs/reference.md §13, on every answer to an allowed origin.
func TestCORS(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[0], func(o *app.Options) { o.HTTP.CORSOrigins = []string{"https://app.example"} }, nil)
	pre := func(origin string) httpResp {
		return do(t, "OPTIONS", p.urlA+"/v1/requests", "", 5*time.Second, "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type, prefer")
	}
	r := pre("https://app.example")
	if r.code != 204 || r.h.Get("Access-Control-Allow-Origin") != "https://app.example" || r.h.Get("Access-Control-Max-Age") == "" ||
		!strings.Contains(r.h.Get("Access-Control-Allow-Methods"), "POST") || r.h.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("preflight: %d %v", r.code, r.h)
	}
	for _, h := range []string{"Authorization", "X-Poll-Token", "Idempotency-Key", "If-None-Match", "Prefer", "Content-Type", "Last-Event-ID"} {
		if !strings.Contains(r.h.Get("Access-Control-Allow-Headers"), h) {
			t.Fatalf("Allow-Headers %q lacks %s", r.h.Get("Access-Control-Allow-Headers"), h)
		}
	}
	if r := pre("https://evil.example"); r.h.Get("Access-Control-Allow-Origin") != "" || r.h.Get("Access-Control-Allow-Methods") != "" {
		t.Fatalf("other origin: %v", r.h)
	}
	id, _ := p.create(t)
	for _, c := range []struct {
		path string
		hdr  []string
		code int
	}{
		{"/v1/requests/" + id, []string{"Authorization", "Bearer " + p.key}, 200},
		{"/v1/requests/" + id, nil, 401},
		{"/v1/requests/nope", []string{"Authorization", "Bearer " + p.key}, 404},
		{"/healthz", nil, 200},
	} {
		r := do(t, "GET", p.urlA+c.path, "", 5*time.Second, append(c.hdr, "Origin", "https://app.example")...)
		if r.code != c.code || r.h.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(r.h.Get("Vary"), "Origin") {
			t.Fatalf("%s: %d %v", c.path, r.code, r.h)
		}
		for _, h := range []string{"ETag", "Retry-After", "Location", "Operation-Location", "Preference-Applied", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
			if !strings.Contains(r.h.Get("Access-Control-Expose-Headers"), h) {
				t.Fatalf("Expose-Headers lacks %s", h)
			}
		}
		r = do(t, "GET", p.urlA+c.path, "", 5*time.Second, append(c.hdr, "Origin", "https://evil.example")...)
		if r.h.Get("Access-Control-Allow-Origin") != "" || r.h.Get("Access-Control-Expose-Headers") != "" {
			t.Fatalf("%s from another origin: %v", c.path, r.h)
		}
	}
	// no configured origin: no CORS header at all
	q := newReplicaPair(t, testenv.Backends()[0], nil, nil)
	if r := do(t, "OPTIONS", q.urlA+"/v1/requests", "", 5*time.Second, "Origin", "https://app.example", "Access-Control-Request-Method", "POST"); r.h.Get("Access-Control-Allow-Origin") != "" || strings.Contains(r.h.Get("Vary"), "Origin") {
		t.Fatalf("CORS off: %v", r.h)
	}
}

// TestStreamQueryTokenNeverLogged: the access log names the route, never the
// query, so a poll token sent as ?poll_token= stays out of it (and out of the
// error log of a refused stream).
func TestStreamQueryTokenNeverLogged(t *testing.T) {
	var logs testenv.Buffer
	p := newReplicaPair(t, testenv.Backends()[0], func(o *app.Options) {
		o.HTTP.AccessLog = httpapi.NewAccessLog(&logs, nil)
	}, nil)
	id, tok := p.create(t)
	p.transition(t, id, "cancel", "")
	res := openStream(t, p.urlA+"/v1/requests/"+id+"/stream?poll_token="+tok)
	if evs := readEvents(t, res); len(evs) != 1 {
		t.Fatalf("%+v", evs)
	}
	do(t, "GET", p.urlA+"/v1/requests/"+id+"/stream?poll_token="+tok+"x", "", 5*time.Second)
	if strings.Contains(logs.String(), tok) || !strings.Contains(logs.String(), "/v1/requests/:id/stream") {
		t.Fatalf("access log:\n%s", logs.String())
	}
}

// TestLongPollSurvivesAClusterFailover: long polls held on replica A while
// the master of their tenant's slot is killed; the transitions, made through
// replica B once the cluster has failed over, still end every wait with the
// new state (the hub resubscribes on the promoted replica and reads again).
func TestLongPollSurvivesAClusterFailover(t *testing.T) {
	c, be := failoverCluster(t)
	p := newReplicaPair(t, be, nil, nil)
	auth := []string{"Authorization", "Bearer " + p.key}
	const n = 5
	ids := make([]string, n)
	answers := make(chan httpResp, n)
	for i := range ids {
		ids[i], _ = p.create(t)
		go func() {
			answers <- do(t, "GET", p.urlA+"/v1/requests/"+ids[i], "", 50*time.Second, append(auth, "Prefer", "wait=30")...)
		}()
	}
	waitWaiting(t, p.a, n)
	time.Sleep(time.Second) // a slot is taken before the first read: let every wait get past it
	c.Node(c.MasterOf("{acme}")).Stop()
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			r := do(t, "POST", p.urlB+"/v1/requests/"+id+"/processing", "", 5*time.Second, auth...)
			if r.code == 200 {
				break
			}
			if r.code != 503 || time.Now().After(deadline) {
				t.Fatalf("transition during the failover: %d %s", r.code, r.body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for range ids {
		if r := <-answers; r.code != 200 || r.request(t).Version != 2 {
			t.Fatalf("%d %s", r.code, r.body)
		}
	}
}

// TestParkedLongPollIsObserved: a held long poll answers after its handler
// returned (park.go), on a context of its own. Its answer still carries the
// headers set before the wait, closes the connection, and is counted and
// logged once, under its route, with the whole wait in its duration.
func TestParkedLongPollIsObserved(t *testing.T) {
	log := &syncBuffer{}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := newReplicaPair(t, testenv.Backends()[1], func(o *app.Options) {
		o.HTTP.Metrics, o.HTTP.AccessLog = m, httpapi.NewAccessLog(log, nil)
	}, nil)
	id, _ := p.create(t)
	start := time.Now()
	r := do(t, "GET", p.urlA+"/v1/requests/"+id, "", 10*time.Second, "Authorization", "Bearer "+p.reader,
		"Prefer", "wait=1", "X-Request-Id", "parked-1")
	if held := time.Since(start); r.code != 200 || held < 900*time.Millisecond {
		t.Fatalf("long poll: %d after %v: %s", r.code, held, r.body)
	}
	if got := r.request(t); got.ID != id || got.Status != domain.StatusQueued {
		t.Fatalf("answer %+v", got)
	}
	for k, want := range map[string]string{"X-Request-Id": "parked-1", "Preference-Applied": "wait=1", "Retry-After": "0",
		"Etag": `"1"`, "Cache-Control": "no-store", "Content-Type": "application/json"} {
		if got := r.h.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if r.h.Get("Date") == "" {
		t.Error("no Date header")
	}
	// net/http hides Connection: close; a bare connection shows it, and
	// that the server closed the connection after the answer
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.urlA, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/requests/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nPrefer: wait=1\r\n\r\n", id, p.reader)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	raw, err := io.ReadAll(conn) // to EOF: the server closes
	if err != nil || !strings.HasPrefix(string(raw), "HTTP/1.1 200 OK\r\n") || !strings.Contains(string(raw), "\r\nConnection: close\r\n") {
		t.Errorf("bare long poll: %v\n%s", err, raw)
	}
	var lines []map[string]any
	for _, l := range log.lines(t) {
		if l["request_id"] == "parked-1" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d access lines for the long poll, want 1: %v", len(lines), lines)
	}
	l := lines[0]
	if l["route"] != "/v1/requests/:id" || l["status"] != float64(200) || l["duration_ms"].(float64) < 900 {
		t.Errorf("access line %v", l)
	}
	reg := scrapeServer(t, p.urlA)
	if !strings.Contains(reg, `asyncstatus_http_requests_total{class="2xx",method="GET",route="/v1/requests/:id"} 2`+"\n") { // the two long polls
		t.Errorf("long polls not counted once each under their route:\n%s", reg)
	}
}

// scrapeServer reads /metrics of the server at url.
func scrapeServer(t *testing.T, url string) string {
	t.Helper()
	r := do(t, "GET", url+"/metrics", "", 5*time.Second)
	if r.code != 200 {
		t.Fatalf("/metrics: %d", r.code)
	}
	return string(r.body)
}

// TestStreamFirstEventNamesItsRequest: a stream's first event is written
// after its handler returned and its Fiber context went back to the pool,
// where other requests (as long as its own) take it; the event still names
// its own request.
func TestStreamFirstEventNamesItsRequest(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[1], nil, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if r := do(t, "GET", p.urlA+"/v1/requests/"+uuid.Must(uuid.NewV7()).String(), "", 5*time.Second, "Authorization", "Bearer "+p.reader); r.code != 404 {
					t.Errorf("unknown id: %d %s", r.code, r.body)
					return
				}
			}
		})
	}
	defer wg.Wait()
	defer close(stop)
	for range 40 {
		id, _ := p.create(t)
		res := openStream(t, p.urlA+"/v1/requests/"+id+"/stream", "Authorization", "Bearer "+p.reader)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
		}
		var got domain.Request
		if err := json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data: ")), &got); err != nil || got.ID != id {
			t.Fatalf("first event of %s names %q (%v): %s", id, got.ID, err, sc.Text())
		}
		res.Body.Close()
	}
}
