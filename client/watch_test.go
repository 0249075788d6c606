package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/client"
)

func watchKey(r *client.Request) string { return fmt.Sprintf("%s v%d %s", r.ID, r.Version, r.Status) }

// markers creates requests of type marker (label team=blue) until stop is
// closed: the first one a watch reports proves the watch is held.
func markers(ctx context.Context, c *client.Client) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			_, _ = c.Create(ctx, client.CreateParams{Type: "marker", Labels: map[string]string{"team": "blue"}})
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// TestWatch: the iterator reports each change of the tenant's requests the
// filters keep, and a later watch resumed from an event's ID reports
// exactly the changes made after it.
func TestWatch(t *testing.T) {
	eachBackend(t, serviceOptions{}, func(t *testing.T, s *service) {
		c := s.client(t, "rw")
		other := s.client(t, "other")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stop := markers(ctx, c)
		defer stop()
		var want, got, ids []string
		var last string
		blue := client.WatchOptions{Labels: map[string]string{"team": "blue"}}
		for ev, err := range c.Watch(ctx, blue) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Reset || ev.ID == "" || ev.Request == nil {
				t.Fatalf("event %+v", ev)
			}
			if ev.Request.Type == "marker" {
				if want == nil { // held: make the changes now
					stop()
					for range 3 {
						cr, err := c.Create(ctx, client.CreateParams{Type: "export", Labels: map[string]string{"team": "blue"}})
						if err != nil {
							t.Fatal(err)
						}
						ids = append(ids, cr.ID)
						want = append(want, watchKey(&cr.Request))
						if _, err := c.Create(ctx, client.CreateParams{Type: "export", Labels: map[string]string{"team": "red"}}); err != nil {
							t.Fatal(err)
						}
						if _, err := other.Create(ctx, client.CreateParams{Type: "export", Labels: map[string]string{"team": "blue"}}); err != nil {
							t.Fatal(err)
						}
						r, err := c.MarkProcessing(ctx, cr.ID, client.NewProgress(10, "go"))
						if err != nil {
							t.Fatal(err)
						}
						want = append(want, watchKey(r))
					}
				}
				continue
			}
			got, last = append(got, watchKey(ev.Request)), ev.ID
			if len(got) == len(want) {
				break
			}
		}
		sameChanges(t, got, want)

		// resumed from the last event: only what came after it
		want, got = nil, nil
		r, err := c.Heartbeat(ctx, ids[0], client.NewProgress(50, "half"))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, watchKey(r))
		if r, err = c.Complete(ctx, ids[1], &client.Confirmation{Confirmed: true}); err != nil {
			t.Fatal(err)
		}
		want = append(want, watchKey(r))
		cr, err := c.Create(ctx, client.CreateParams{Type: "import", Labels: map[string]string{"team": "blue"}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, watchKey(&cr.Request))
		blue.LastEventID = last
		for ev, err := range c.Watch(ctx, blue) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Reset {
				t.Fatalf("reset resuming from %q", last)
			}
			got = append(got, watchKey(ev.Request))
			if len(got) == len(want) {
				break
			}
		}
		sameChanges(t, got, want)
	})
}

// TestWatchResumesByItself: when the service ends a watch (wait.stream_max,
// a restart), the iterator reconnects with Last-Event-ID and goes on; a reset
// reaches the caller as such; a 400 ends the iteration with its error.
func TestWatchResumesByItself(t *testing.T) {
	rep := func(id string, v int64) string {
		return fmt.Sprintf(`{"id":%q,"type":"t","status":"queued","done":false,"version":%d,"created_by":"k",`+
			`"created_at":"2026-11-29T10:00:00.000Z","updated_at":"2026-11-29T10:00:00.000Z","completed_at":null,"expires_at":null}`, id, v)
	}
	var mu sync.Mutex
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(lastIDs)
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if r.URL.Path != "/v1/requests" || r.URL.Query().Get("watch") != "true" || r.URL.Query().Get("type") != "t" {
			w.WriteHeader(400)
			return
		}
		switch n {
		case 0: // two changes, a keep-alive that moves the position, then the stream ends
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "retry: 50\n\n: keep-alive\n\nid: p1\nevent: request\ndata: "+rep("a", 1)+"\n\n"+
				"id: p2\nevent: request\ndata: "+rep("b", 1)+"\n\nid: p2b\n: keep-alive\n\n")
		case 1: // resumed: a reset, then a change
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "retry: 50\n\nid: p3\nevent: reset\ndata: {}\n\nid: p4\nevent: request\ndata: "+rep("a", 2)+"\n\n")
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"type":"about:blank","title":"x","status":400,"detail":"x","code":"VALIDATION_FAILED"}`)
		}
	}))
	defer srv.Close()
	c := mustClient(t, srv.URL)
	var got []string
	var last error
	for ev, err := range c.Watch(context.Background(), client.WatchOptions{Type: "t"}) {
		if err != nil {
			last = err
			break
		}
		switch {
		case ev.Reset:
			got = append(got, ev.ID+" reset")
		default:
			got = append(got, ev.ID+" "+watchKey(ev.Request))
		}
	}
	want := []string{"p1 a v1 queued", "p2 b v1 queued", "p3 reset", "p4 a v2 queued"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	var e *client.Error
	if last == nil || !errors.As(last, &e) || e.Status != 400 {
		t.Fatalf("the 400 ended it with %v", last)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(lastIDs) != fmt.Sprint([]string{"", "p2b", "p4"}) {
		t.Fatalf("Last-Event-ID sent: %q", lastIDs)
	}
}

func sameChanges(t testing.TB, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	seen := map[string]bool{}
	for _, g := range got {
		if seen[g] {
			t.Fatalf("%q twice in %q", g, got)
		}
		seen[g] = true
	}
	for _, w := range want {
		if !seen[w] {
			t.Fatalf("%q missing from %q", w, got)
		}
	}
}
