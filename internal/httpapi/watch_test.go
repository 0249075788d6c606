package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// liveWatch is an open watch whose events arrive on a channel as they are
// read, so that a test can take some and then cut the connection.
type liveWatch struct {
	res    *http.Response
	events chan sseEvent
	// positions are the ids of blocks without data (a keep-alive that moves
	// the position of a filtered watch), the latest kept
	positions chan string
	cancel    context.CancelFunc
}

func openWatch(t testing.TB, url string, hdr ...string) *liveWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" || res.Header.Get("Cache-Control") != "no-store" {
		cancel()
		t.Fatalf("watch %s: %d %v", url, res.StatusCode, res.Header)
	}
	w := &liveWatch{res: res, events: make(chan sseEvent, 1000), positions: make(chan string, 1), cancel: cancel}
	go func() {
		defer close(w.events)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.event != "" {
					w.events <- cur
				} else if cur.id != "" {
					select { // keep the latest
					case <-w.positions:
					default:
					}
					w.positions <- cur.id
				}
				cur = sseEvent{}
			default: // a comment, retry: or a field
				cur.field(line)
			}
		}
	}()
	t.Cleanup(w.close)
	return w
}

// close cuts the connection, as a client that goes away does.
func (w *liveWatch) close() {
	w.cancel()
	_ = w.res.Body.Close()
}

// take reads n events; a watch that does not deliver them in 10s fails.
func (w *liveWatch) take(t testing.TB, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case e, ok := <-w.events:
			if !ok {
				t.Fatalf("watch ended after %d of %d events: %+v", len(out), n, out)
			}
			out = append(out, e)
		case <-deadline:
			t.Fatalf("%d of %d events within 10s: %+v", len(out), n, out)
		}
	}
	return out
}

// changes are the events' "<id> v<version> <status>", or "reset".
func changes(t testing.TB, evs []sseEvent) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		if e.id == "" {
			t.Fatalf("event without an id: %+v", e)
		}
		if e.event == "reset" {
			if e.data != "{}" {
				t.Fatalf("reset %+v", e)
			}
			out = append(out, "reset")
			continue
		}
		var r domain.Request
		if e.event != "request" || json.Unmarshal([]byte(e.data), &r) != nil {
			t.Fatalf("event %+v", e)
		}
		out = append(out, fmt.Sprintf("%s v%d %s", r.ID, r.Version, r.Status))
	}
	return out
}

func sameSet(t testing.TB, got, want []string) {
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
			t.Fatalf("%q missing from %q (want %q)", w, got, want)
		}
	}
}

// mk creates a request through replica b and returns it.
func (p *replicaPair) mk(t testing.TB, key, body string) domain.Request {
	t.Helper()
	r := do(t, "POST", p.urlB+"/v1/requests", body, 5*time.Second, "Authorization", "Bearer "+key)
	if r.code != 202 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	return r.request(t)
}

func (p *replicaPair) move(t testing.TB, id, what, body string) domain.Request {
	t.Helper()
	r := do(t, "POST", p.urlB+"/v1/requests/"+id+"/"+what, body, 5*time.Second, "Authorization", "Bearer "+p.key)
	if r.code != 200 {
		t.Fatalf("%s: %d %s", what, r.code, r.body)
	}
	return r.request(t)
}

func ch(r domain.Request) string { return fmt.Sprintf("%s v%d %s", r.ID, r.Version, r.Status) }

// TestWatchRoute (docs/reference.md §16): a watch held on one replica sees
// the changes made through the other, filtered, of its tenant only; cut and
// resumed with Last-Event-ID (on the other replica) it gets exactly the
// changes it missed; a position it cannot resume starts with a reset; bad
// parameters answer 400 problem+json.
func TestWatchRoute(t *testing.T) {
	for _, be := range testenv.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			p := newReplicaPair(t, be, nil, func(o *store.Options) { o.TenantShards = 4 })
			plain, key, err := auth.NewKey("beta", domain.ScopeRead|domain.ScopeWrite, "k", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := p.st.SaveKey(context.Background(), key); err != nil {
				t.Fatal(err)
			}
			w := openWatch(t, p.urlA+"/v1/requests?watch=true&type=export&label_selector=team%3Dblue", "Authorization", "Bearer "+p.reader)
			var want []string
			var ids []string
			for range 4 {
				r := p.mk(t, p.key, `{"type":"export","labels":{"team":"blue"}}`)
				want, ids = append(want, ch(r)), append(ids, r.ID)
				p.mk(t, p.key, `{"type":"export","labels":{"team":"red"}}`)  // another label
				p.mk(t, p.key, `{"type":"import","labels":{"team":"blue"}}`) // another type
				p.mk(t, plain, `{"type":"export","labels":{"team":"blue"}}`) // another tenant
				want = append(want, ch(p.move(t, r.ID, "processing", `{"percent":10}`)))
			}
			got := w.take(t, len(want))
			sameSet(t, changes(t, got), want)
			last := got[len(got)-1].id
			w.close() // the client goes away

			var missed []string
			missed = append(missed, ch(p.move(t, ids[0], "processing", `{"percent":50}`))) // a heartbeat
			missed = append(missed, ch(p.move(t, ids[1], "complete", `{"result_type":"confirmation","result":{"confirmed":true}}`)))
			missed = append(missed, ch(p.move(t, ids[2], "fail", `{"code":"ERR_X","reason":"x"}`)))
			missed = append(missed, ch(p.mk(t, p.key, `{"type":"export","labels":{"team":"blue","zone":"eu"}}`)))
			p.mk(t, plain, `{"type":"export","labels":{"team":"blue"}}`)
			w2 := openWatch(t, p.urlB+"/v1/requests?watch=true&type=export&label_selector=team%3Dblue", "Authorization", "Bearer "+p.reader,
				"Last-Event-ID", last)
			got = w2.take(t, len(missed))
			sameSet(t, changes(t, got), missed)
			live := ch(p.move(t, ids[3], "cancel", ""))
			if got := changes(t, w2.take(t, 1)); got[0] != live {
				t.Fatalf("after the replay: %q, want %q", got, live)
			}

			// a position that is not one: reset, then live changes
			w3 := openWatch(t, p.urlA+"/v1/requests?watch=true", "Authorization", "Bearer "+p.reader, "Last-Event-ID", "not-a-position")
			if got := changes(t, w3.take(t, 1)); got[0] != "reset" {
				t.Fatalf("garbled position: %q", got)
			}
			r := p.mk(t, p.key, `{"type":"other"}`)
			if got := changes(t, w3.take(t, 1)); got[0] != ch(r) {
				t.Fatalf("after the reset: %q, want %s", got, ch(r))
			}

			// every status filter and the tenant: beta sees its own only
			w4 := openWatch(t, p.urlA+"/v1/requests?watch=true&status=succeeded,failed", "Authorization", "Bearer "+plain)
			rb := p.mk(t, plain, `{"type":"export"}`)
			p.mk(t, p.key, `{"type":"export"}`)
			rbDone := do(t, "POST", p.urlB+"/v1/requests/"+rb.ID+"/fail", `{"code":"ERR_Y","reason":"y"}`, 5*time.Second, "Authorization", "Bearer "+plain).request(t)
			if got := changes(t, w4.take(t, 1)); got[0] != ch(rbDone) {
				t.Fatalf("status filter: %q, want %s", got, ch(rbDone))
			}
		})
	}
}

// TestWatchKeepAliveMovesThePosition: a watch whose filter drops the latest
// changes moves its client's position past them with a keep-alive (an id
// with no data), so that resuming from it replays only later changes.
func TestWatchKeepAliveMovesThePosition(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[1], nil, nil)
	w := openWatch(t, p.urlA+"/v1/requests?watch=true&type=rare", "Authorization", "Bearer "+p.reader)
	rare := p.mk(t, p.key, `{"type":"rare"}`)
	first := w.take(t, 1)[0]
	for range 3 {
		p.mk(t, p.key, `{"type":"common"}`)
	}
	var pos string
	deadline := time.After(10 * time.Second)
	for pos == "" || pos == first.id {
		select {
		case pos = <-w.positions:
		case <-deadline:
			t.Fatalf("no keep-alive moved the position past %s", first.id)
		}
	}
	w.close()
	again := ch(p.move(t, rare.ID, "cancel", ""))
	w2 := openWatch(t, p.urlB+"/v1/requests?watch=true", "Authorization", "Bearer "+p.reader, "Last-Event-ID", pos)
	if got := changes(t, w2.take(t, 1)); got[0] != again {
		t.Fatalf("resumed from the keep-alive's position: %q, want only %s", got, again)
	}
}

func TestWatchBadParameters(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[0], nil, nil)
	for _, q := range []string{"watch=maybe", "watch=true&limit=5", "watch=true&cursor=abc", "watch=true&created_after=2026-01-01T00:00:00Z",
		"watch=true&ids=x", "watch=true&label_selector=bad", "watch=true&type=BAD!", "watch=true&status=done", "watch=true&stauts=queued",
		"watch=true&type=a&type=b"} {
		r := do(t, "GET", p.urlA+"/v1/requests?"+q, "", 5*time.Second, "Authorization", "Bearer "+p.reader)
		var prob map[string]any
		if r.code != 400 || r.h.Get("Content-Type") != "application/problem+json" || json.Unmarshal(r.body, &prob) != nil ||
			prob["code"] != "VALIDATION_FAILED" {
			t.Fatalf("%s: %d %s", q, r.code, r.body)
		}
	}
	if r := do(t, "GET", p.urlA+"/v1/requests?watch=true", "", 5*time.Second); r.code != 401 {
		t.Fatalf("no credential: %d %s", r.code, r.body)
	}
	// watch=false is a listing
	if r := do(t, "GET", p.urlA+"/v1/requests?watch=false", "", 5*time.Second, "Authorization", "Bearer "+p.reader); r.code != 200 ||
		!strings.Contains(string(r.body), `"items"`) {
		t.Fatalf("watch=false: %d %s", r.code, r.body)
	}
}

// TestWatchSurvivesAClusterFailover: watches held while the master of the
// tenant's first shard is killed report every change acknowledged after it
// (the hub resubscribes on the promoted replica, and each feed reads the log
// again from where it was), none twice.
func TestWatchSurvivesAClusterFailover(t *testing.T) {
	c, be := failoverCluster(t)
	p := newReplicaPair(t, be, nil, func(o *store.Options) { o.TenantShards = 4 })
	auth := []string{"Authorization", "Bearer " + p.key}
	const n = 6
	ids := make([]string, n)
	for i := range ids {
		ids[i], _ = p.create(t)
	}
	var watches []*liveWatch
	for range 3 {
		watches = append(watches, openWatch(t, p.urlA+"/v1/requests?watch=true", "Authorization", "Bearer "+p.reader))
	}
	waitWaiting(t, p.a, len(watches))
	c.Node(c.MasterOf("{acme}")).Stop()
	deadline := time.Now().Add(30 * time.Second)
	var acked []string
	for _, id := range ids {
		for {
			r := do(t, "POST", p.urlB+"/v1/requests/"+id+"/processing", "", 5*time.Second, auth...)
			if r.code == 200 {
				acked = append(acked, ch(r.request(t)))
				break
			}
			if r.code != 503 || time.Now().After(deadline) {
				t.Fatalf("transition during the failover: %d %s", r.code, r.body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for i, w := range watches {
		// every acknowledged change, maybe among changes whose answer was lost (503)
		want := map[string]bool{}
		for _, a := range acked {
			want[a] = true
		}
		seen := map[string]bool{}
		deadline := time.After(30 * time.Second)
		for len(want) > 0 {
			select {
			case e, ok := <-w.events:
				if !ok {
					t.Fatalf("watch %d ended; still missing %v", i, want)
				}
				got := changes(t, []sseEvent{e})[0]
				if got == "reset" {
					t.Fatalf("watch %d reset", i)
				}
				if seen[got] {
					t.Fatalf("watch %d: %s twice", i, got)
				}
				seen[got] = true
				delete(want, got)
			case <-deadline:
				t.Fatalf("watch %d: missing %v after the failover", i, want)
			}
		}
	}
}
