package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/client"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// worker drives request id through processing, heartbeats with progress and
// success, pausing between steps, in the background.
func worker(t *testing.T, c *client.Client, id string, pause time.Duration) <-chan error {
	t.Helper()
	ctx := context.Background()
	return testenv.Paced(pause,
		func() error { _, err := c.MarkProcessing(ctx, id, client.NewProgress(10, "start")); return err },
		func() error { _, err := c.Heartbeat(ctx, id, client.NewProgress(60, "half")); return err },
		func() error { _, err := c.Complete(ctx, id, &client.Confirmation{Confirmed: true}); return err },
	)
}

// follow waits for id through c and checks the states it reported.
func follow(t *testing.T, c *client.Client, id string, o *client.WaitOptions) []*client.Request {
	t.Helper()
	var seen []*client.Request
	if o == nil {
		o = &client.WaitOptions{}
	}
	o.OnChange = func(r *client.Request) { seen = append(seen, r) }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	final, err := c.Wait(ctx, id, o)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != client.StatusSucceeded || len(seen) == 0 || seen[len(seen)-1] != final {
		t.Fatalf("final %+v, seen %d", final, len(seen))
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Version <= seen[i-1].Version {
			t.Fatalf("versions out of order: %d after %d", seen[i].Version, seen[i-1].Version)
		}
	}
	return seen
}

// TestWaitLongPoll: a service that applies Prefer: wait is followed by long
// polls: every answer says Preference-Applied, no poll is refused as early,
// and every state is seen (a long poll answers each change).
func TestWaitLongPoll(t *testing.T) {
	eachBackend(t, serviceOptions{}, func(t *testing.T, s *service) {
		p := newProxy(t, s.URL)
		c := s.client(t, "rw")
		cr := mustCreate(t, c, "statement.export")
		done := worker(t, c, cr.ID, 300*time.Millisecond)
		// No RetryAfter: a fresh client that does not know yet that the
		// service long-polls would first wait for it, and miss early states.
		seen := follow(t, mustClient(t, p.URL, client.WithPollToken(cr.PollToken)), cr.ID, nil)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		polls := p.calls("GET /v1/requests/")
		for _, x := range polls {
			if x.Req.Get("Prefer") == "" {
				t.Fatalf("a poll without Prefer: %v", x.Req)
			}
			if x.Resp.Get("Preference-Applied") == "" {
				t.Fatalf("the service did not apply the long poll (answer %d, headers %v)", x.Status, x.Resp)
			}
			if x.Status == 429 {
				t.Fatal("a long poll was refused as early")
			}
		}
		if len(seen) != 4 { // queued, processing, heartbeat, succeeded
			t.Fatalf("saw %d states, want all 4", len(seen))
		}
	})
}

// TestWaitPolling: behind a proxy that strips Prefer, Wait paces itself by
// Retry-After (none of its polls is early, the first waits for the create's
// Retry-After), sends If-None-Match, and still ends at the terminal state.
func TestWaitPolling(t *testing.T) {
	eachBackend(t, serviceOptions{}, func(t *testing.T, s *service) {
		p := newProxy(t, s.URL)
		p.stripPrefer.Store(true)
		c := s.client(t, "rw")
		created := time.Now()
		cr := mustCreate(t, c, "statement.export")
		done := worker(t, c, cr.ID, 700*time.Millisecond)
		follow(t, mustClient(t, p.URL, client.WithPollToken(cr.PollToken)), cr.ID, &client.WaitOptions{RetryAfter: cr.RetryAfter})
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		polls := p.calls("GET /v1/requests/")
		if len(polls) < 2 {
			t.Fatalf("%d polls", len(polls))
		}
		if polls[0].At.Sub(created) < cr.RetryAfter {
			t.Fatalf("first poll %v after the create, which said Retry-After %v", polls[0].At.Sub(created), cr.RetryAfter)
		}
		notModified := 0
		for i, x := range polls {
			if x.Status == 429 {
				t.Fatalf("poll %d was early", i)
			}
			if x.Resp.Get("Preference-Applied") != "" {
				t.Fatal("the proxy let Prefer through")
			}
			if i > 0 && x.Req.Get("If-None-Match") == "" {
				t.Fatalf("poll %d without If-None-Match", i)
			}
			if x.Status == 304 {
				notModified++
			}
		}
		t.Logf("%d polls, %d answered 304", len(polls), notModified)
	})
}

// TestWaitThrottled: 429 of both codes and 503, injected by a proxy, are
// waited out (for at least their Retry-After) and the wait still ends.
func TestWaitThrottled(t *testing.T) {
	s := startService(t, backends()[0], serviceOptions{})
	p := newProxy(t, s.URL)
	p.stripPrefer.Store(true)
	c := s.client(t, "rw")
	cr := mustCreate(t, c, "statement.export")
	var mu sync.Mutex
	faults := []struct {
		status int
		code   string
	}{{429, client.CodePolledTooEarly}, {429, client.CodeRateLimited}, {503, client.CodeBackendUnavailable}, {503, client.CodeBackendUnavailable}}
	p.setInject(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != "GET" || len(faults) == 0 {
			return false
		}
		f := faults[0]
		faults = faults[1:]
		problem(w, f.status, f.code, 1)
		return true
	})
	done := worker(t, c, cr.ID, 200*time.Millisecond)
	follow(t, mustClient(t, p.URL, client.WithAPIKey(s.Keys["r"])), cr.ID, &client.WaitOptions{MaxBackoff: 2 * time.Second})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	polls := p.calls("GET /v1/requests/")
	for i := 1; i < len(polls); i++ {
		if polls[i-1].Status == 429 || polls[i-1].Status == 503 {
			if gap := polls[i].At.Sub(polls[i-1].At); gap < time.Second {
				t.Fatalf("poll %d came %v after a %d with Retry-After: 1", i, gap, polls[i-1].Status)
			}
		}
	}
	if len(polls) < 5 {
		t.Fatalf("%d polls for 4 faults and an answer", len(polls))
	}
}

func TestWaitEnds(t *testing.T) {
	s := startService(t, backends()[0], serviceOptions{})
	c := s.client(t, "rw")
	ctx := context.Background()
	t.Run("Deadline", func(t *testing.T) {
		cr := mustCreate(t, c, "statement.export")
		ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		last, err := c.Wait(ctx, cr.ID, nil)
		if !errors.Is(err, context.DeadlineExceeded) || last == nil || last.Status != client.StatusQueued {
			t.Fatalf("%+v %v", last, err)
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		_, err := c.Wait(ctx, "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", nil)
		wantErr(t, err, client.ErrNotFound, 404, client.CodeNotFound)
	})
	t.Run("Terminal", func(t *testing.T) {
		cr := mustCreate(t, c, "statement.export")
		if _, err := c.Fail(ctx, cr.ID, "ERR_X", "no"); err != nil {
			t.Fatal(err)
		}
		r, err := c.Wait(ctx, cr.ID, nil)
		if err != nil || r.Status != client.StatusFailed || r.Failure.Code != "ERR_X" {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("GivesUp", func(t *testing.T) {
		p := newProxy(t, s.URL)
		p.setInject(func(w http.ResponseWriter, r *http.Request) bool {
			problem(w, 503, client.CodeBackendUnavailable, 0)
			return true
		})
		cr := mustCreate(t, c, "statement.export")
		_, err := mustClient(t, p.URL, client.WithAPIKey(s.Keys["r"])).Wait(ctx, cr.ID, &client.WaitOptions{MaxErrors: 3, MaxBackoff: 50 * time.Millisecond})
		wantErr(t, err, client.ErrBackendUnavailable, 503, client.CodeBackendUnavailable)
		if n := len(p.calls("GET")); n != 3 {
			t.Fatalf("%d polls before giving up, want 3", n)
		}
	})
}

// TestStream follows a request over the real service's event stream.
func TestStream(t *testing.T) {
	eachBackend(t, serviceOptions{}, func(t *testing.T, s *service) {
		c := s.client(t, "rw")
		cr := mustCreate(t, c, "statement.export")
		done := worker(t, c, cr.ID, 200*time.Millisecond)
		var seen []*client.Request
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		final, err := mustClient(t, s.URL, client.WithPollToken(cr.PollToken)).Stream(ctx, cr.ID,
			&client.StreamOptions{OnChange: func(r *client.Request) { seen = append(seen, r) }})
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if final.Status != client.StatusSucceeded || len(seen) < 2 || seen[0].Version != 1 {
			t.Fatalf("final %+v, seen %d", final, len(seen))
		}
		// resumed at the end: nothing more to see, the final state returned
		called := false
		again, err := c.Stream(ctx, cr.ID, &client.StreamOptions{LastEventID: strconv.FormatInt(final.Version, 10),
			OnChange: func(*client.Request) { called = true }})
		if err != nil || again.Version != final.Version || !again.Done || called {
			t.Fatalf("resumed at the terminal version: %+v %v (OnChange called: %v)", again, err, called)
		}
		// resumed in the middle: only the later states
		var later []int64
		again, err = c.Stream(ctx, cr.ID, &client.StreamOptions{LastEventID: strconv.FormatInt(final.Version-1, 10),
			OnChange: func(r *client.Request) { later = append(later, r.Version) }})
		if err != nil || len(later) != 1 || later[0] != final.Version {
			t.Fatalf("resumed one version before the end: %+v %v", later, err)
		}
		_, err = c.Stream(ctx, "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", nil)
		wantErr(t, err, client.ErrNotFound, 404, client.CodeNotFound)
	})
}

// TestStreamResumes: a stream cut before the end is resumed with
// Last-Event-ID, after the stream's retry: time, and no state is repeated.
func TestStreamResumes(t *testing.T) {
	rep := func(v int64, status string) string {
		b, _ := json.Marshal(map[string]any{"id": "r1", "type": "t", "status": status, "done": status == "succeeded", "version": v,
			"created_by": "k", "created_at": "2026-11-29T10:00:00.000Z", "updated_at": "2026-11-29T10:00:00.000Z",
			"completed_at": nil, "expires_at": nil})
		return string(b)
	}
	var mu sync.Mutex
	var lastIDs []string
	var conns []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(lastIDs)
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		conns = append(conns, time.Now())
		mu.Unlock()
		if r.Header.Get("X-Poll-Token") != "tok" || r.URL.Path != "/v1/requests/r1/stream" {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch n {
		case 0: // two states, then the stream is cut (wait.stream_max)
			_, _ = io.WriteString(w, "retry: 300\n\n: keep-alive\n\nid: 1\nevent: request\ndata: "+rep(1, "queued")+"\n\n"+
				"id: 2\r\nevent: request\r\ndata: "+rep(2, "processing")+"\r\n\r\n")
		case 1: // resumed: a repeat of 2 must not be reported again, then the end
			_, _ = io.WriteString(w, "id: 2\nevent: request\ndata: "+rep(2, "processing")+"\n\n"+
				"id: 3\nevent: request\ndata: "+rep(3, "succeeded")+"\n\n")
		}
	}))
	defer srv.Close()
	c := mustClient(t, srv.URL, client.WithPollToken("tok"))
	var versions []int64
	final, err := c.Stream(context.Background(), "r1", &client.StreamOptions{OnChange: func(r *client.Request) { versions = append(versions, r.Version) }})
	if err != nil {
		t.Fatal(err)
	}
	if final.Version != 3 || !final.Done || len(versions) != 3 || versions[2] != 3 {
		t.Fatalf("final %+v, versions %v", final, versions)
	}
	if len(lastIDs) != 2 || lastIDs[0] != "" || lastIDs[1] != "2" {
		t.Fatalf("Last-Event-ID sent: %q", lastIDs)
	}
	if gap := conns[1].Sub(conns[0]); gap < 300*time.Millisecond {
		t.Fatalf("reconnected after %v, the stream said retry: 300", gap)
	}
}

// fakeLongPoll is a service stand-in that applies Prefer: wait exactly as
// docs/reference.md §12 says, for one request whose version the test advances: it checks
// the client's side of the protocol whatever the real service offers.
type fakeLongPoll struct {
	mu      sync.Mutex
	version int64
	changed chan struct{}
	polls   []http.Header
}

func (f *fakeLongPoll) advance() {
	f.mu.Lock()
	f.version++
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *fakeLongPoll) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.polls = append(f.polls, r.Header.Clone())
	v, ch := f.version, f.changed
	f.mu.Unlock()
	etag := `"` + strconv.FormatInt(v, 10) + `"`
	if r.Header.Get("Prefer") != "" && v < 4 {
		w.Header().Set("Preference-Applied", r.Header.Get("Prefer"))
		if inm := r.Header.Get("If-None-Match"); inm == "" || inm == etag { // held until a change
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
			}
		}
	}
	f.mu.Lock()
	v = f.version
	f.mu.Unlock()
	etag = `"` + strconv.FormatInt(v, 10) + `"`
	w.Header().Set("ETag", etag)
	if v < 4 {
		w.Header().Set("Retry-After", "0")
	}
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(304)
		return
	}
	status := map[int64]string{1: "queued", 2: "processing", 3: "processing", 4: "succeeded"}[v]
	b, _ := json.Marshal(map[string]any{"id": "r1", "type": "t", "status": status, "done": v == 4, "version": v,
		"created_by": "k", "created_at": "2026-11-29T10:00:00.000Z", "updated_at": "2026-11-29T10:00:00.000Z",
		"completed_at": nil, "expires_at": nil})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func TestWaitLongPollProtocol(t *testing.T) {
	f := &fakeLongPoll{version: 1, changed: make(chan struct{})}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := mustClient(t, srv.URL, client.WithPollToken("tok"))
	go func() {
		for range 3 {
			time.Sleep(200 * time.Millisecond)
			f.advance()
		}
	}()
	var versions []int64
	final, err := c.Wait(context.Background(), "r1", &client.WaitOptions{OnChange: func(r *client.Request) { versions = append(versions, r.Version) }})
	if err != nil || !final.Done {
		t.Fatalf("%+v %v", final, err)
	}
	if len(versions) != 4 { // a long poll answers every change
		t.Fatalf("versions seen %v", versions)
	}
	f.mu.Lock()
	polls := f.polls
	f.mu.Unlock()
	if polls[0].Get("If-None-Match") != `"0"` {
		t.Fatalf("the first poll would be held until a change: %v", polls[0])
	}
	for i, h := range polls {
		if h.Get("Prefer") != "wait=25" || h.Get("If-None-Match") == "" {
			t.Fatalf("poll %d: %v", i, h)
		}
	}
	// Now that this client knows the service long-polls, a create's
	// Retry-After is not waited for: the wait ends long before it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.Wait(ctx, "r1", &client.WaitOptions{RetryAfter: time.Minute}); err != nil {
		t.Fatalf("a known long-poll service: %v", err)
	}
}
