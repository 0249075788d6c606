package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// TestFigures measures what docs/webhooks.md reports: the latency from a
// transition to the receiver (p50/p99), with the dispatcher in the replica that
// made the transition and in another one, and the throughput of one replica's
// dispatcher draining a backlog. It only runs when asked:
//
//	ASYNCSTATUS_WEBHOOK_FIGURES=1 go test -run TestFigures -v ./internal/webhook/
func TestFigures(t *testing.T) {
	if os.Getenv("ASYNCSTATUS_WEBHOOK_FIGURES") == "" {
		t.Skip("set ASYNCSTATUS_WEBHOOK_FIGURES=1 to measure")
	}
	for _, b := range backends()[:2] {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			n := 400
			t.Run("LatencySameReplica", func(t *testing.T) { latency(t, rdb, n, true) })
			t.Run("LatencyOtherReplica", func(t *testing.T) { latency(t, rdb, n/4, false) })
			backlog := 5000
			if b.Name == "miniredis" {
				backlog = 2000
			}
			for _, c := range []int{32, 128} { // 32: the default
				t.Run("Throughput", func(t *testing.T) { throughput(t, rdb, backlog, c, c, 0) })
			}
			// A receiver that takes 50ms, default settings: one tenant has at most
			// MaxPerTenant (16) attempts in flight per replica.
			t.Run("ThroughputSlowReceiver", func(t *testing.T) { throughput(t, rdb, 1000, 0, 0, 50*time.Millisecond) })
		})
	}
}

// stamp is a receiver that notes when each webhook-id first arrived.
type stamp struct {
	mu   sync.Mutex
	at   map[string]time.Time
	srv  *httptest.Server
	done chan struct{}
	want int
}

func newStamp(t *testing.T, want int, delay time.Duration) *stamp {
	s := &stamp{at: map[string]time.Time{}, done: make(chan struct{}), want: want}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		time.Sleep(delay)
		id := r.Header.Get("webhook-id")
		s.mu.Lock()
		if _, ok := s.at[id]; !ok {
			s.at[id] = now
			if len(s.at) == s.want {
				close(s.done)
			}
		}
		s.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stamp) wait(t *testing.T, timeout time.Duration) {
	select {
	case <-s.done:
	case <-time.After(timeout):
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Fatalf("received %d of %d", len(s.at), s.want)
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

func latency(t *testing.T, rdb redis.UniversalClient, n int, same bool) {
	prefix := testenv.Isolate(t)
	writer := newFixture(t, rdb, prefix)
	rcv := newStamp(t, n, 0)
	writer.register("acme", rcv.srv.URL, domain.EventSucceeded)
	deliverer := writer
	if !same {
		deliverer = writer.replica() // no nudge from the writer's process: its poll finds the message
	}
	deliverer.startDispatcher(func(o *webhook.DispatcherOptions) {
		o.PollInterval, o.RegistryInterval, o.ClaimIdle = 0, 0, 0 // defaults: 500ms, 2s, timeout + 5s
	})
	time.Sleep(100 * time.Millisecond)
	started := make(map[string]time.Time, n)
	for i := 0; i < n; i++ {
		id := writer.create("acme")
		started["msg_"+id+"_s"] = time.Now()
		writer.complete("acme", id)
		time.Sleep(time.Duration(2+i%7) * time.Millisecond)
	}
	rcv.wait(t, 30*time.Second)
	ds := make([]time.Duration, 0, n)
	rcv.mu.Lock()
	for id, at := range rcv.at {
		ds = append(ds, at.Sub(started[id]))
	}
	rcv.mu.Unlock()
	t.Logf("transition -> receiver, %d messages, dispatcher in the %s replica: p50 %s p99 %s max %s",
		n, map[bool]string{true: "same", false: "other"}[same], pct(ds, 0.5).Round(10*time.Microsecond),
		pct(ds, 0.99).Round(10*time.Microsecond), pct(ds, 1).Round(10*time.Microsecond))
}

func throughput(t *testing.T, rdb redis.UniversalClient, n, concurrency, perTenant int, delay time.Duration) {
	f := newFixture(t, rdb, testenv.Isolate(t))
	rcv := newStamp(t, n, delay)
	f.register("acme", rcv.srv.URL, domain.EventSucceeded)
	var wg sync.WaitGroup
	ids := make(chan int, n)
	for i := 0; i < n; i++ {
		ids <- i
	}
	close(ids)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ids {
				f.complete("acme", f.create("acme"))
			}
		}()
	}
	wg.Wait()
	if got := f.outboxLen("acme"); got != int64(n) {
		t.Fatalf("backlog %d, want %d", got, n)
	}
	start := time.Now()
	d, _ := f.startDispatcher(func(o *webhook.DispatcherOptions) {
		o.PollInterval, o.RegistryInterval, o.ClaimIdle = 0, 0, 0
		o.Concurrency, o.MaxPerTenant = concurrency, perTenant // 0: the defaults
	})
	rcv.wait(t, 120*time.Second)
	took := time.Since(start)
	waitUntil(t, "the outbox to empty", func() bool { return f.outboxLen("acme") == 0 })
	t.Logf("one replica, concurrency %d, per tenant %d, receiver delay %s: %d messages in %s = %.0f messages/s (delivered %d)",
		d.Options().Concurrency, d.Options().MaxPerTenant, delay, n, took.Round(time.Millisecond), float64(n)/took.Seconds(), d.Stats().Delivered)
}
