package lrotest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// queuedTimeout is lifecycle.queued_timeout of the test service: short, so
// that a request left queued expires within a poller's bound. Every other
// scenario moves its request out of queued long before.
const queuedTimeout = 3 * time.Second

// clientBound is how long one client may take to drive a request to its end.
const clientBound = 60 * time.Second

// service is the real HTTP service in process, over a real store.
type service struct {
	URL string
	// Keys by name: "rw" (read, write) and "admin" (every scope) of tenant
	// acme, "other" (every scope) of tenant globex.
	Keys map[string]string
}

// backends are the embedded store's way (miniredis through in-memory pipes)
// and a real redis-server.
func backends() []testenv.Backend { return testenv.Backends()[:2] }

// eachBackend runs f as a subtest on every backend, each with its service.
func eachBackend(t *testing.T, f func(t *testing.T, s *service)) {
	for _, b := range backends() {
		t.Run(b.Name, func(t *testing.T) { f(t, startService(t, b)) })
	}
}

// startService starts the service over backend b as serve wires it: a hub
// for waits, a sweeper that expires queued requests, polling.schedule 1s.
func startService(t testing.TB, b testenv.Backend) *service {
	t.Helper()
	rdb := b.Client(t)
	st, err := store.New(rdb, store.Options{Prefix: fmt.Sprintf("lro%d", time.Now().UnixNano()), OpTimeout: 5 * time.Second,
		QueuedTimeout: queuedTimeout, Retention: time.Hour, Schedule: []int{1}, EarlyTolerance: 0.2,
		AutoPipeline: b.AutoPipeline})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(app.Options{Store: st, Auth: auth.New(st, []byte("0123456789abcdef0123456789abcdef"), 10*time.Millisecond, nil),
		HTTP: httpapi.Options{Schedule: []int{1},
			Limits:      domain.Limits{ContextBytes: 4096, ResultBytes: 16384},
			ReadTimeout: 10 * time.Second, WriteTimeout: time.Minute, IdleTimeout: time.Minute,
			Wait: httpapi.WaitOptions{Max: 25 * time.Second, MaxWaiters: 1000, ReadTimeout: 5 * time.Second}},
		Log: log, Listener: ln, Waits: &store.HubOptions{Log: log},
		Sweep: &sweep.Options{Interval: 200 * time.Millisecond, Log: log}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	svc := &service{}
	if svc.Keys, err = testenv.SaveKeys(context.Background(), st, time.Now(),
		testenv.TestKey{Name: "rw", Tenant: "acme", Scopes: domain.ScopeRead | domain.ScopeWrite},
		testenv.TestKey{Name: "admin", Tenant: "acme", Scopes: domain.ScopeRead | domain.ScopeWrite | domain.ScopeAdmin},
		testenv.TestKey{Name: "other", Tenant: "globex", Scopes: domain.ScopeRead | domain.ScopeWrite | domain.ScopeAdmin},
	); err != nil {
		t.Fatal(err)
	}
	a.Start(context.Background())
	svc.URL = "http://" + ln.Addr().String()
	return svc
}

// call sends one API call with key and decodes a JSON answer into out (nil:
// ignored); it returns the status.
func (s *service) call(t testing.TB, method, path, key, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+s.Keys[key])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, res.StatusCode, b, err)
		}
	}
	return res.StatusCode
}

// The terminal statuses every client is driven to.
var ends = []domain.Status{domain.StatusSucceeded, domain.StatusFailed, domain.StatusCancelled, domain.StatusExpired}

// worker plays the backend that does the work: it finds the one request of
// typ (created by the client under test), and drives it to end: succeeded
// through processing (40%) and complete, failed through processing and
// fail, cancelled by cancel; expired by leaving it queued. It returns the
// request's id, or an error.
func (s *service) worker(ctx context.Context, t testing.TB, typ string, end domain.Status) <-chan string {
	found := make(chan string, 1)
	go func() {
		defer close(found)
		id := s.await(ctx, t, typ)
		if id == "" {
			return
		}
		found <- id
		p := "/v1/requests/" + id
		step := func(path, body string) {
			if code := s.call(t, "POST", p+path, "rw", body, nil); code != 200 {
				t.Errorf("worker %s %s: %d", typ, path, code)
			}
		}
		switch end {
		case domain.StatusSucceeded:
			step("/processing", `{"percent":40,"message":"page 4 of 10"}`)
			sleep(ctx, 1500*time.Millisecond) // the pollers see it running
			step("/complete", `{"result_type":"answer","result":{"rows":42}}`)
		case domain.StatusFailed:
			step("/processing", `{"percent":10}`)
			sleep(ctx, 1500*time.Millisecond)
			step("/fail", `{"code":"ERR_UPSTREAM","reason":"ledger service unavailable"}`)
		case domain.StatusCancelled:
			sleep(ctx, 1500*time.Millisecond)
			step("/cancel", `{"reason":"no longer needed"}`)
		}
	}()
	return found
}

// await lists the tenant's requests of typ until one appears.
func (s *service) await(ctx context.Context, t testing.TB, typ string) string {
	for {
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		if code := s.call(t, "GET", "/v1/requests?type="+typ, "admin", "", &page); code != 200 {
			t.Errorf("list %s: %d", typ, code)
			return ""
		}
		if len(page.Items) > 0 {
			return page.Items[0].ID
		}
		if sleep(ctx, 50*time.Millisecond) != nil {
			t.Errorf("no request of type %s appeared", typ)
			return ""
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// scenarioType is the request type one client's run to end uses: each run
// finds its own request by it.
func scenarioType(client string, end domain.Status) string {
	return "lro." + client + "." + string(end)
}
