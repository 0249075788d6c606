package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// waitServer is one server with a notification hub on miniredis, listening
// on loopback, with keys of tenants acme (two) and globex.
type waitServer struct {
	srv  *httpapi.Server
	url  string
	keys map[string]string
}

func newWaitServer(t testing.TB, mod func(*app.Options)) *waitServer {
	t.Helper()
	be := testenv.Backends()[0]
	st, err := store.New(be.Client(t), store.Options{Prefix: testenv.Isolate(t), OpTimeout: 2 * time.Second, Retention: time.Hour,
		Schedule: []int{1, 2, 5}, EarlyTolerance: 0.2, AutoPipeline: be.AutoPipeline})
	if err != nil {
		t.Fatal(err)
	}
	srv, url := serveWaits(t, st, time.Minute, mod)
	all := domain.ScopeRead | domain.ScopeWrite | domain.ScopeAdmin
	keys, err := testenv.SaveKeys(context.Background(), st, time.Now(),
		testenv.TestKey{Name: "acme", Tenant: "acme", Scopes: all},
		testenv.TestKey{Name: "acme2", Tenant: "acme", Scopes: all},
		testenv.TestKey{Name: "globex", Tenant: "globex", Scopes: all})
	if err != nil {
		t.Fatal(err)
	}
	return &waitServer{srv: srv, url: url, keys: keys}
}

func (w *waitServer) create(t testing.TB, key string) (id, token string) {
	t.Helper()
	r := do(t, "POST", w.url+"/v1/requests", `{"type":"export"}`, 5*time.Second, "Authorization", "Bearer "+w.keys[key])
	if r.code != 202 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	var m map[string]any
	_ = json.Unmarshal(r.body, &m)
	return m["id"].(string), m["poll_token"].(string)
}

// hold opens a long poll of 30 s on its own connection and reports, on the
// channel, when (and if, within the test) it is answered.
func (w *waitServer) hold(t testing.TB, id string, hdr ...string) <-chan int {
	t.Helper()
	done := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", w.url+"/v1/requests/"+id, nil)
	req.Header.Set("Prefer", "wait=30")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer cancel()
		res, err := hc.Do(req)
		if err != nil {
			done <- -1
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	t.Cleanup(cancel)
	return done
}

// answeredAtOnce fails unless the wait was answered (200) within 5 s.
func answeredAtOnce(t testing.TB, what string, ch <-chan int) {
	t.Helper()
	select {
	case code := <-ch:
		if code != 200 {
			t.Fatalf("%s: answered %d, want 200 (an ordinary poll)", what, code)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: held, want an answer at once (past its share)", what)
	}
}

// TestWaitShares: one credential holds at most its share of the wait slots
// and one tenant at most its own; past them a long poll is an ordinary poll
// and a stream ends after the current state, while another credential of
// the tenant (within the tenant's share) and another tenant still wait.
func TestWaitShares(t *testing.T) {
	w := newWaitServer(t, func(o *app.Options) {
		o.HTTP.Wait.MaxWaiters, o.HTTP.Wait.MaxWaitersPerTenant, o.HTTP.Wait.MaxWaitersPerCredential = 20, 4, 3
	})
	auth := func(k string) []string { return []string{"Authorization", "Bearer " + w.keys[k]} }
	var ids []string
	for range 6 {
		id, _ := w.create(t, "acme")
		ids = append(ids, id)
	}
	// the key's share: 3 held, the 4th answered at once
	for i := range 3 {
		w.hold(t, ids[i], auth("acme")...)
	}
	waitWaiting(t, w.srv, 3)
	answeredAtOnce(t, "acme's key past its share", w.hold(t, ids[3], auth("acme")...))
	// another key of acme: one more, up to the tenant's share
	w.hold(t, ids[3], auth("acme2")...)
	waitWaiting(t, w.srv, 4)
	answeredAtOnce(t, "acme past its tenant share", w.hold(t, ids[4], auth("acme2")...))
	// a poll token of acme is acme's too
	tid, tok := w.create(t, "acme")
	answeredAtOnce(t, "acme's poll token past the tenant share", w.hold(t, tid, "X-Poll-Token", tok))
	// acme's stream past its share: the current state, then the end
	res := openStream(t, w.url+"/v1/requests/"+ids[5]+"/stream", auth("acme2")...)
	if evs := readEvents(t, res); len(evs) != 1 {
		t.Fatalf("acme's stream past its share: %d events, want 1 and the end", len(evs))
	}
	// globex still waits, by long poll and by stream
	gid, gtok := w.create(t, "globex")
	w.hold(t, gid, auth("globex")...)
	waitWaiting(t, w.srv, 5)
	sreq, _ := http.NewRequest("GET", w.url+"/v1/requests/"+gid+"/stream?poll_token="+gtok, nil)
	sres, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	defer sres.Body.Close()
	waitWaiting(t, w.srv, 6)
	br := bufio.NewReader(sres.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("globex's stream ended: %v", err)
		}
		if strings.HasPrefix(line, ": keep-alive") {
			break // held past its first event: a wait, not an ordinary poll
		}
	}
}
