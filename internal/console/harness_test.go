package console_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/console"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

var ctx = context.Background()

// stack is a store on one backend with the console in front of it (and, for
// the browser tests, the public API too), sharing one clock and one log.
type stack struct {
	st      *store.Store
	rdb     redis.UniversalClient // the store's
	auth    *auth.Authenticator
	clock   func() time.Time
	console *console.Server
	url     string // the console's base URL
	api     string // the API's base URL ("" unless withAPI)
	logs    *testenv.Buffer
	metrics *metrics.Metrics
}

type stackOptions struct {
	clock    func() time.Time // default time.Now
	cacheTTL time.Duration    // auth.key_cache_ttl; default 0 (no cache)
	withAPI  bool
	config   []byte
	live     time.Duration
	// poll leaves the console without the notification hub: live views re-read
	// every live interval.
	poll bool
}

func newStack(tb testing.TB, b testenv.Backend, o stackOptions) *stack {
	tb.Helper()
	if o.clock == nil {
		o.clock = time.Now
	}
	rdb := b.Client(tb)
	st, err := store.New(rdb, store.Options{Prefix: testenv.Isolate(tb), OpTimeout: 5 * time.Second,
		Now: o.clock, AutoPipeline: b.AutoPipeline, Retention: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	if err := st.Ready(ctx); err != nil {
		tb.Fatalf("ready: %v", err)
	}
	s := &stack{st: st, rdb: rdb, clock: o.clock, logs: &testenv.Buffer{}}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("log:\n%s", s.logs.String())
		}
	})
	log := slog.New(slog.NewJSONHandler(s.logs, nil))
	s.auth = auth.New(st, []byte("0123456789abcdef0123456789abcdef"), o.cacheTTL, o.clock)
	reg := prometheus.NewRegistry()
	if s.metrics, err = metrics.New(reg); err != nil {
		tb.Fatal(err)
	}
	ao := app.Options{Store: st, Auth: s.auth, HTTP: httpapi.Options{Metrics: s.metrics}, Log: log,
		// Without the hub (poll), live views re-read every live interval.
		Console: &app.ConsoleOptions{Options: console.Options{SessionTTL: time.Hour, Config: o.config, Gatherer: reg,
			Log: log, Now: o.clock, LiveInterval: orDefault(o.live, 50*time.Millisecond)}, Listener: listen(tb), Live: !o.poll}}
	if o.withAPI {
		ao.Listener = listen(tb)
	}
	s.console, s.url = start(tb, ao), "http://"+ao.Console.Listener.Addr().String()
	if o.withAPI {
		s.api = "http://" + ao.Listener.Addr().String()
	}
	return s
}

// start builds the service of o (internal/app) and starts it until the test
// ends: its console.
func start(tb testing.TB, o app.Options) *console.Server {
	tb.Helper()
	a, err := app.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	a.Start(context.Background())
	tb.Cleanup(func() { _ = a.Close() })
	return a.Console()
}

func listen(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ln
}

// replica is a second service with the console over the same store and
// authenticator (another serve replica): the base URL of its console.
func (s *stack) replica(tb testing.TB) string {
	tb.Helper()
	log := slog.New(slog.NewJSONHandler(s.logs, nil))
	c := &app.ConsoleOptions{Options: console.Options{SessionTTL: time.Hour, Now: s.clock, Log: log}, Listener: listen(tb)}
	start(tb, app.Options{Store: s.st, Auth: s.auth, Log: log, Console: c})
	return "http://" + c.Listener.Addr().String()
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// key makes a tenant key and returns it in plain form with its id.
func (s *stack) key(tb testing.TB, tenant string, scopes domain.Scopes) (string, string) {
	tb.Helper()
	plain, k, err := auth.NewKey(tenant, scopes, "test "+tenant, s.clock())
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.st.SaveKey(ctx, k); err != nil {
		tb.Fatal(err)
	}
	return plain, k.ID
}

func (s *stack) operatorKey(tb testing.TB) (string, string) {
	tb.Helper()
	plain, k, err := auth.NewOperatorKey("ops", s.clock())
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.st.SaveKey(ctx, k); err != nil {
		tb.Fatal(err)
	}
	return plain, k.ID
}

func (s *stack) create(tb testing.TB, tenant, typ string) *domain.Request {
	tb.Helper()
	r, _, err := s.st.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: tenant, By: "key_t"}, Input: domain.CreateInput{Type: typ}})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func (s *stack) status(tb testing.TB, tenant, id string) domain.Status {
	tb.Helper()
	res, err := s.st.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: tenant}, ID: id})
	if err != nil {
		tb.Fatalf("read %s: %v", id, err)
	}
	return res.Request.Status
}

// client is a browser without a browser: a cookie jar, no redirects followed.
type client struct {
	tb   testing.TB
	base string
	hc   *http.Client
	// seen collects every body, setCookies every Set-Cookie header, for the
	// secrets test.
	seen, setCookies *strings.Builder
}

func (s *stack) client(tb testing.TB) *client {
	jar, _ := cookiejar.New(nil)
	return &client{tb: tb, base: s.url, seen: &strings.Builder{}, setCookies: &strings.Builder{}, hc: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (c *client) do(req *http.Request) answer {
	c.tb.Helper()
	resp, err := c.hc.Do(req)
	if err != nil {
		c.tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	c.seen.WriteString(string(b))
	for _, v := range resp.Header.Values("Set-Cookie") {
		c.setCookies.WriteString("\n" + v + "\n")
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func (c *client) get(path string) answer {
	c.tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	return c.do(req)
}

func (c *client) post(path string, form url.Values) answer {
	c.tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(tb testing.TB, body string) string {
	tb.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		tb.Fatalf("no csrf field in page:\n%s", body)
	}
	return m[1]
}

// signIn signs the client in with key through the sign-in form.
func (c *client) signIn(key string) answer {
	c.tb.Helper()
	page := c.get("/signin")
	return c.post("/signin", url.Values{"key": {key}, "csrf": {csrfOf(c.tb, page.body)}})
}

// mustSignIn signs in and fails unless the console let the key in.
func (s *stack) mustSignIn(tb testing.TB, key string) *client {
	tb.Helper()
	c := s.client(tb)
	if a := c.signIn(key); a.status != http.StatusSeeOther {
		tb.Fatalf("sign-in: %d\n%s", a.status, a.body)
	}
	return c
}

// csrf is the session's CSRF token, read from a page.
func (c *client) csrf(path string) string {
	c.tb.Helper()
	return csrfOf(c.tb, c.get(path).body)
}

func miniredis() testenv.Backend { return testenv.Backends()[0] }
