package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/memconn"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// The service the Example functions talk to (started by TestMain, on the
// embedded store's way: miniredis through buffered in-memory pipes).
var (
	serviceURL string
	apiKey     string
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

// runTests starts the examples' service, then runs the tests through testenv.
func runTests(m *testing.M) int {
	mr, err := miniredis.Run()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Dialer: memconn.Dialer(mr.Dial),
		DisableIdentity: true})
	defer rdb.Close()
	svc, stop, err := newService(rdb, serviceOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	serviceURL, apiKey = svc.URL, svc.Keys["admin"]
	return testenv.Main(m)
}

// service is the real HTTP service, in process, over a real store.
type service struct {
	URL   string
	Store *store.Store
	// Keys by name: "rw" (read, write), "r" (read), "w" (write), "admin"
	// (every scope) of tenant acme, "other" (every scope) of tenant globex.
	Keys map[string]string
}

type serviceOptions struct {
	// processingTimeout and sweep: lifecycle.processing_timeout and
	// lifecycle.sweep_interval. default: 15m and 10s.
	processingTimeout time.Duration
	sweep             time.Duration
	// schedule is polling.schedule in whole seconds. default: 1 (every poll
	// answers Retry-After: 1, so that paced tests stay short).
	schedule []int
	// bodyLimit is http.body_limit_bytes. default: 1 MiB.
	bodyLimit int
}

// startService starts the service over backend b for this test.
func startService(t testing.TB, b testenv.Backend, o serviceOptions) *service {
	t.Helper()
	svc, stop, err := newService(b.Client(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return svc
}

// backends are the stores the suite runs on: the embedded store's way
// (miniredis) and a real redis-server.
func backends() []testenv.Backend { return testenv.Backends()[:2] }

// eachBackend runs f as a subtest on every backend.
func eachBackend(t *testing.T, o serviceOptions, f func(t *testing.T, s *service)) {
	for _, b := range backends() {
		t.Run(b.Name, func(t *testing.T) { f(t, startService(t, b, o)) })
	}
}

func newService(rdb redis.UniversalClient, o serviceOptions) (*service, func(), error) {
	if o.schedule == nil {
		o.schedule = []int{1}
	}
	if o.sweep == 0 {
		o.sweep = 10 * time.Second
	}
	if o.bodyLimit == 0 {
		o.bodyLimit = 1 << 20
	}
	st, err := store.New(rdb, store.Options{Prefix: fmt.Sprintf("c%d", time.Now().UnixNano()), OpTimeout: 5 * time.Second,
		ProcessingTimeout: o.processingTimeout, Retention: time.Hour, Schedule: o.schedule, EarlyTolerance: 0.2,
		RetentionBucket: o.sweep})
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sealer, err := webhook.RandomSealer()
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	// As serve composes it, with waiting without polling (docs/reference.md §12).
	a, err := app.New(app.Options{Store: st, Auth: auth.New(st, []byte("0123456789abcdef0123456789abcdef"), 10*time.Millisecond, nil),
		HTTP: httpapi.Options{BodyLimitBytes: o.bodyLimit, Schedule: o.schedule,
			Limits:      domain.Limits{ContextBytes: 4096, ResultBytes: 16384},
			ReadTimeout: 10 * time.Second, WriteTimeout: time.Minute, IdleTimeout: time.Minute,
			Wait: httpapi.WaitOptions{Max: 25 * time.Second, MaxWaiters: 10000, ReadTimeout: 5 * time.Second}},
		Log: log, Listener: ln, Waits: &store.HubOptions{Log: log},
		Sweep: &sweep.Options{Interval: o.sweep, Log: log},
		Webhooks: &webhook.DispatcherOptions{Timeout: 2 * time.Second, Guard: &webhook.Guard{AllowHTTP: true, AllowPrivate: true},
			Sealer: sealer, PollInterval: 100 * time.Millisecond, RegistryInterval: 100 * time.Millisecond, Log: log}})
	if err != nil {
		_ = ln.Close()
		return nil, nil, err
	}
	svc := &service{Store: st}
	if svc.Keys, err = testenv.SaveKeys(context.Background(), st, time.Now(),
		testenv.TestKey{Name: "rw", Tenant: "acme", Scopes: domain.ScopeRead | domain.ScopeWrite},
		testenv.TestKey{Name: "r", Tenant: "acme", Scopes: domain.ScopeRead},
		testenv.TestKey{Name: "w", Tenant: "acme", Scopes: domain.ScopeWrite},
		testenv.TestKey{Name: "admin", Tenant: "acme", Scopes: domain.ScopeRead | domain.ScopeWrite | domain.ScopeAdmin},
		testenv.TestKey{Name: "other", Tenant: "globex", Scopes: domain.ScopeRead | domain.ScopeWrite | domain.ScopeAdmin},
	); err != nil {
		_ = a.Close()
		_ = ln.Close()
		return nil, nil, err
	}
	a.Start(context.Background())
	svc.URL = "http://" + ln.Addr().String()
	stop := func() { _ = a.Close() }
	return svc, stop, nil
}

// proxy is a reverse proxy in front of a service that records what passes,
// can strip the Prefer header (a service that ignores long polls) and can
// answer some calls itself (injected faults).
type proxy struct {
	URL string
	rp  *httputil.ReverseProxy
	mu  sync.Mutex
	log []*exchange
	// stripPrefer drops Prefer from every call.
	stripPrefer atomic.Bool
	inject      func(w http.ResponseWriter, r *http.Request) bool
}

// exchange is one call through the proxy and its answer.
type exchange struct {
	At     time.Time
	Method string
	Path   string
	Req    http.Header // as the client sent it
	Status int
	Resp   http.Header
	// done is closed once Status and Resp are noted: after the client may
	// already have read the answer.
	done chan struct{}
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{rp: httputil.NewSingleHostReverseProxy(u)}
	p.rp.FlushInterval = -1 // streams pass at once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := &exchange{At: time.Now(), Method: r.Method, Path: r.URL.Path, Req: r.Header.Clone(), done: make(chan struct{})}
		p.mu.Lock()
		p.log = append(p.log, x)
		inject := p.inject
		p.mu.Unlock()
		if p.stripPrefer.Load() {
			r.Header.Del("Prefer")
		}
		rec := &recorder{ResponseWriter: w}
		if inject == nil || !inject(rec, r) {
			p.rp.ServeHTTP(rec, r)
		}
		p.mu.Lock()
		x.Status, x.Resp = rec.status, w.Header().Clone()
		p.mu.Unlock()
		close(x.done)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// recorder notes the status an answer was given.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// setInject makes f see every call first; it answers the call itself by
// returning true. nil: everything passes.
func (p *proxy) setInject(f func(w http.ResponseWriter, r *http.Request) bool) {
	p.mu.Lock()
	p.inject = f
	p.mu.Unlock()
}

// calls returns the exchanges whose "METHOD path" has this prefix.
func (p *proxy) calls(prefix string) []exchange {
	p.mu.Lock()
	var match []*exchange
	for _, x := range p.log {
		if strings.HasPrefix(x.Method+" "+x.Path, prefix) {
			match = append(match, x)
		}
	}
	p.mu.Unlock()
	// The client has its answer before the proxy notes it: give the calls
	// still being noted a moment (a stream still open stays unanswered).
	grace := time.NewTimer(500 * time.Millisecond)
	defer grace.Stop()
wait:
	for _, x := range match {
		select {
		case <-x.done:
		case <-grace.C:
			break wait
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]exchange, len(match))
	for i, x := range match {
		out[i] = *x
	}
	return out
}

// problem writes a problem+json answer as the service would.
func problem(w http.ResponseWriter, status int, code string, retryAfter int) {
	w.Header().Set("Content-Type", "application/problem+json")
	if retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"https://asyncstatus.dev/problems/x","title":"x","status":%d,"detail":"injected","instance":"/","code":%q,"request_id":"inj"}`,
		status, code)
}
