package app_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/audit"
	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// sink is an audit sink that counts its Close calls.
type sink struct{ closed atomic.Int32 }

func (s *sink) Write(context.Context, [][]byte) error { return nil }
func (s *sink) Close() error                          { s.closed.Add(1); return nil }

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() }) // the App's from New on; New may refuse it
	return ln
}

// every is the options of every part, over a store on each backend.
func every(t *testing.T, be testenv.Backend, snk *sink) app.Options {
	t.Helper()
	st, err := store.New(be.Client(t), store.Options{Prefix: testenv.Isolate(t), OpTimeout: 2 * time.Second,
		Retention: time.Hour, AutoPipeline: be.AutoPipeline})
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := webhook.RandomSealer()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := app.Options{Store: st, Auth: auth.New(st, []byte("0123456789abcdef0123456789abcdef"), time.Second, nil),
		Log: log, Metrics: m, Listener: listen(t), MetricsListener: listen(t),
		Waits:    &store.HubOptions{Log: log},
		Sweep:    &sweep.Options{Interval: time.Hour, Log: log},
		Webhooks: &webhook.DispatcherOptions{Guard: &webhook.Guard{}, Sealer: sealer, Log: log},
		Audit:    &audit.Options{Sink: snk, Log: log},
		Console:  &app.ConsoleOptions{Listener: listen(t), Live: true}}
	o.Console.Log = log
	return o
}

func get(url string) (int, error) {
	res, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil
}

// TestRunServesEveryListenerUntilTheContextEnds: Run serves the API, the
// console and the metrics listener; once ctx ends it returns, every listener
// is closed and the audit sink is closed once, however often Close is called.
func TestRunServesEveryListenerUntilTheContextEnds(t *testing.T) {
	for _, be := range testenv.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			snk := &sink{}
			o := every(t, be, snk)
			a, err := app.New(o)
			if err != nil {
				t.Fatal(err)
			}
			if a.Hub() == nil || a.Console() == nil {
				t.Fatal("every part was asked for, yet the hub or the console is missing")
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- a.Run(ctx) }()
			urls := map[string]string{
				"api":     "http://" + o.Listener.Addr().String() + "/livez",
				"metrics": "http://" + o.MetricsListener.Addr().String() + "/metrics",
				"console": "http://" + o.Console.Listener.Addr().String() + "/signin",
			}
			for name, u := range urls {
				if code, err := get(u); err != nil || code != 200 {
					t.Fatalf("%s %s: %d %v", name, u, code, err)
				}
			}
			cancel()
			if err := <-ran; err != nil {
				t.Fatalf("Run: %v", err)
			}
			for name, u := range urls {
				if _, err := get(u); err == nil {
					t.Errorf("%s still answers after Run returned", name)
				}
			}
			if err := a.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if n := snk.closed.Load(); n != 1 {
				t.Fatalf("audit sink closed %d times, want 1", n)
			}
		})
	}
}

// TestCloseWithoutStart releases what New was given: the listeners and the
// audit sink.
func TestCloseWithoutStart(t *testing.T) {
	snk := &sink{}
	o := every(t, testenv.Backends()[0], snk)
	a, err := app.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ln := range []net.Listener{o.Listener, o.MetricsListener, o.Console.Listener} {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections", ln.Addr())
		}
	}
	if n := snk.closed.Load(); n != 1 {
		t.Fatalf("audit sink closed %d times, want 1", n)
	}
}

// TestNewRefusesIncompleteOptions: a service without a store or an
// authenticator, a metrics listener without metrics or a console without a
// listener is refused, not a nil dereference later.
func TestNewRefusesIncompleteOptions(t *testing.T) {
	if _, err := app.New(app.Options{}); err == nil {
		t.Fatal("New without Store and Auth: no error")
	}
	o := every(t, testenv.Backends()[0], &sink{})
	o.Metrics = nil
	if _, err := app.New(o); err == nil {
		t.Fatal("New with a metrics listener and no metrics: no error")
	}
	o = every(t, testenv.Backends()[0], &sink{})
	o.Console.Listener = nil
	if _, err := app.New(o); err == nil {
		t.Fatal("New with a console and no listener: no error")
	}
}
