package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// backend is one kind of Redis the suite runs on (testenv.Backends).
type backend = testenv.Backend

func backends() []backend { return testenv.Backends() }

// eachBackend runs f as a subtest on every backend.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.Name, func(t *testing.T) { f(t, b) })
	}
}

var testKey = []byte("webhook-test-key-0123456789abcdef")

// fixture is what one serve replica has: a store over a shared Redis (and key
// prefix), the registration service and, once started, a dispatcher.
type fixture struct {
	t      testing.TB
	rdb    redis.UniversalClient
	prefix string
	st     *store.Store
	svc    *webhook.Service
	guard  *webhook.Guard
}

func newFixture(t testing.TB, rdb redis.UniversalClient, prefix string) *fixture {
	t.Helper()
	return newFixtureWith(t, rdb, store.Options{Prefix: prefix, OpTimeout: 5 * time.Second, Retention: time.Hour})
}

func newFixtureWith(t testing.TB, rdb redis.UniversalClient, so store.Options) *fixture {
	t.Helper()
	prefix := so.Prefix
	st, err := store.New(rdb, so)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := webhook.NewSealer(testKey)
	if err != nil {
		t.Fatal(err)
	}
	// Receivers are httptest servers on loopback: tests allow http and private addresses.
	g := &webhook.Guard{AllowHTTP: true, AllowPrivate: true}
	return &fixture{t: t, rdb: rdb, prefix: prefix, st: st, svc: webhook.NewService(st, g, sealer, nil), guard: g}
}

// replica is another serve replica on the same Redis.
func (f *fixture) replica() *fixture { return newFixture(f.t, f.rdb, f.prefix) }

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startDispatcher runs a dispatcher like serve does, until the test ends or stop.
func (f *fixture) startDispatcher(mod func(*webhook.DispatcherOptions)) (d *webhook.Dispatcher, stop func()) {
	f.t.Helper()
	sealer, _ := webhook.NewSealer(testKey)
	o := webhook.DispatcherOptions{Timeout: 2 * time.Second, RetrySchedule: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond},
		Guard: f.guard, Sealer: sealer, PollInterval: 50 * time.Millisecond, RegistryInterval: 100 * time.Millisecond,
		ClaimIdle: 3 * time.Second, Log: quietLog()}
	if mod != nil {
		mod(&o)
	}
	d, err := webhook.NewDispatcher(f.st, o)
	if err != nil {
		f.t.Fatal(err)
	}
	f.st.OnOutbox(d.Nudge)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			f.st.OnOutbox(nil)
		})
	}
	f.t.Cleanup(stop)
	return d, stop
}

func (f *fixture) register(tenant, url string, events ...domain.WebhookEvent) *domain.Webhook {
	f.t.Helper()
	in := domain.WebhookInput{URL: url, Events: events}
	if len(events) == 0 {
		in.Events = domain.DefaultWebhookEvents
	}
	w, err := f.svc.RegisterWebhook(context.Background(), domain.Call{Tenant: tenant}, in)
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

func (f *fixture) create(tenant string) string {
	f.t.Helper()
	r, _, err := f.st.Create(context.Background(), domain.CreateParams{
		Call:  domain.Call{Tenant: tenant, By: "key_test"},
		Input: domain.CreateInput{Type: "statement.export", Context: json.RawMessage(`{"account":"acc_1"}`)},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return r.ID
}

func (f *fixture) complete(tenant, id string) *domain.Request {
	f.t.Helper()
	r, err := f.st.Complete(context.Background(), domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: "key_test"}, ID: id},
		domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"total":42}`)})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) deliveries(tenant, id string) []domain.WebhookDelivery {
	f.t.Helper()
	ds, err := f.svc.WebhookDeliveries(context.Background(), domain.Call{Tenant: tenant}, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return ds
}

func (f *fixture) outboxLen(tenant string) int64 {
	n, err := f.rdb.XLen(context.Background(), f.prefix+":{"+tenant+"}:ob").Result()
	if err != nil && err != redis.Nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) retriesLen(tenant string) int64 {
	n, _ := f.rdb.ZCard(context.Background(), f.prefix+":{"+tenant+"}:wr").Result()
	return n
}

// received is one request a receiver got.
type received struct {
	id, ts, sig string
	body        []byte
	at          time.Time
	verifyErr   error
	msg         struct {
		Type      string         `json:"type"`
		Timestamp string         `json:"timestamp"`
		Data      domain.Request `json:"data"`
	}
}

// receiver is a partner's endpoint. It verifies every signature as the Standard
// Webhooks specification says (verifyStandardWebhook, written independently of
// the package under test) and answers with status(n, id) for the n-th request
// (1-based) carrying that webhook-id.
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	status func(n int, id string) int

	mu     sync.Mutex
	secret string
	got    []received
	byID   map[string]int
	signal chan struct{}
}

func newReceiver(t testing.TB, status func(n int, id string) int) *receiver {
	r := &receiver{t: t, status: status, byID: map[string]int{}, signal: make(chan struct{}, 1)}
	if r.status == nil {
		r.status = func(int, string) int { return 204 }
	}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) url() string { return r.srv.URL + "/hooks/asyncstatus" }

func (r *receiver) setSecret(s string) { r.mu.Lock(); r.secret = s; r.mu.Unlock() }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(req.Body)
	g := received{id: req.Header.Get("webhook-id"), ts: req.Header.Get("webhook-timestamp"),
		sig: req.Header.Get("webhook-signature"), body: body, at: at}
	r.mu.Lock()
	g.verifyErr = verifyStandardWebhook(r.secret, req.Header, body, at)
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		g.verifyErr = fmt.Errorf("%s with content type %q", req.Method, req.Header.Get("Content-Type"))
	}
	if err := json.Unmarshal(body, &g.msg); err != nil && g.verifyErr == nil {
		g.verifyErr = err
	}
	r.got = append(r.got, g)
	r.byID[g.id]++
	n := r.byID[g.id]
	r.mu.Unlock()
	w.WriteHeader(r.status(n, g.id))
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// waitFor waits until cond holds over what was received.
func (r *receiver) waitFor(what string, timeout time.Duration, cond func([]received) bool) []received {
	r.t.Helper()
	deadline := time.After(timeout)
	for {
		got := r.all()
		if cond(got) {
			return got
		}
		select {
		case <-r.signal:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			r.t.Fatalf("timed out waiting for %s; received %d requests", what, len(got))
		}
	}
}

// verifyStandardWebhook checks a delivery as a receiver following the Standard
// Webhooks specification does: the signed content is id.timestamp.body, the key
// is the base64 part of the whsec_ secret, the header may carry several
// space-separated "v1,<base64>" signatures, and the timestamp must be within
// five minutes of now.
func verifyStandardWebhook(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("missing webhook headers (id %q, timestamp %q, signature %q)", id, ts, sigs)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q: %v", ts, err)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp %d too far from now", sec)
	}
	if !strings.HasPrefix(secret, "whsec_") {
		return fmt.Errorf("receiver has no whsec_ secret")
	}
	key, err := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range strings.Split(sigs, " ") {
		version, sig, ok := strings.Cut(s, ",")
		if ok && version == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("no valid v1 signature in %q", sigs)
}

func countIDs(got []received) map[string]int {
	m := map[string]int{}
	for _, g := range got {
		m[g.id]++
	}
	return m
}

// TestDeliverySigned: a completed request reaches the endpoint once, signed as
// the Standard Webhooks specification says, with the representation of the
// moment of the transition.
func TestDeliverySigned(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b.Client(t), testenv.Isolate(t))
		rcv := newReceiver(t, nil)
		w := f.register("acme", rcv.url())
		rcv.setSecret(w.Secret)
		f.startDispatcher(nil)

		id := f.create("acme")
		done := f.complete("acme", id)
		got := rcv.waitFor("the succeeded message", 10*time.Second, func(g []received) bool { return len(g) >= 1 })
		time.Sleep(150 * time.Millisecond) // nothing else may come
		got = rcv.all()
		if len(got) != 1 {
			t.Fatalf("received %d requests, want 1 (only terminal events by default)", len(got))
		}
		g := got[0]
		if g.verifyErr != nil {
			t.Fatalf("signature: %v", g.verifyErr)
		}
		if g.id != "msg_"+id+"_s" {
			t.Errorf("webhook-id %q", g.id)
		}
		if g.msg.Type != "request.succeeded" || g.msg.Data.ID != id || g.msg.Data.Status != domain.StatusSucceeded ||
			!g.msg.Data.Done || g.msg.Data.Version != done.Version || string(g.msg.Data.Result) != `{"total":42}` ||
			string(g.msg.Data.Context) != `{"account":"acc_1"}` || g.msg.Data.CreatedBy != "key_test" {
			t.Errorf("message: %s", g.body)
		}
		// The representation is the poll's, byte for byte.
		polled, _ := json.Marshal(done)
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		_ = json.Unmarshal(g.body, &env)
		if string(env.Data) != string(polled) {
			t.Errorf("data differs from the representation:\n got %s\nwant %s", env.Data, polled)
		}
		if ts, err := time.Parse(time.RFC3339Nano, g.msg.Timestamp); err != nil || !ts.Equal(done.UpdatedAt.Time) {
			t.Errorf("timestamp %q, want the transition time %s", g.msg.Timestamp, done.UpdatedAt)
		}
		// Delivered and gone from the outbox; the attempt is logged.
		waitUntil(t, "the outbox to empty", func() bool { return f.outboxLen("acme") == 0 })
		ds := f.deliveries("acme", w.ID)
		if len(ds) != 1 || ds[0].State != domain.DeliveryDelivered || ds[0].Attempt != 1 || ds[0].HTTPStatus == nil ||
			*ds[0].HTTPStatus != 204 || ds[0].MessageID != g.id || ds[0].RequestID != id || ds[0].EventType != domain.EventSucceeded ||
			ds[0].NextAttemptAt != nil {
			t.Fatalf("deliveries: %+v", ds)
		}
	})
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEventFilters: each endpoint gets the events it asked for and no other;
// a heartbeat emits nothing.
func TestEventFilters(t *testing.T) {
	f := newFixture(t, backends()[0].Client(t), testenv.Isolate(t))
	terminal := newReceiver(t, nil) // default: the four terminal events
	early := newReceiver(t, nil)    // created and processing
	failures := newReceiver(t, nil) // failed only
	for _, r := range []struct {
		rcv *receiver
		evs []domain.WebhookEvent
	}{{terminal, nil}, {early, []domain.WebhookEvent{domain.EventCreated, domain.EventProcessing}}, {failures, []domain.WebhookEvent{domain.EventFailed}}} {
		r.rcv.setSecret(f.register("acme", r.rcv.url(), r.evs...).Secret)
	}
	f.startDispatcher(nil)
	ctx := context.Background()
	tp := func(id string) domain.TransitionParams {
		return domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_test"}, ID: id}
	}

	a := f.create("acme")
	for i := 0; i < 3; i++ { // start, then two heartbeats
		if _, err := f.st.MarkProcessing(ctx, tp(a), domain.ProgressInput{Progress: json.RawMessage(fmt.Sprintf(`{"percent":%d}`, 10*i))}); err != nil {
			t.Fatal(err)
		}
	}
	f.complete("acme", a)
	bid := f.create("acme")
	if _, err := f.st.Fail(ctx, tp(bid), domain.FailInput{Failure: domain.FailureJSON("ERR_X", "broken")}); err != nil {
		t.Fatal(err)
	}
	c := f.create("acme")
	if _, err := f.st.Cancel(ctx, tp(c), domain.CancelInput{Reason: "no longer needed"}); err != nil {
		t.Fatal(err)
	}

	types := func(r *receiver, n int) []string {
		got := r.waitFor(fmt.Sprintf("%d messages", n), 10*time.Second, func(g []received) bool { return len(g) >= n })
		var out []string
		for _, g := range got {
			if g.verifyErr != nil {
				t.Errorf("signature: %v", g.verifyErr)
			}
			out = append(out, g.msg.Type+" "+g.msg.Data.ID)
		}
		return out
	}
	wantSet := func(name string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s got %v, want %v", name, got, want)
			return
		}
		m := map[string]bool{}
		for _, g := range got {
			m[g] = true
		}
		for _, w := range want {
			if !m[w] {
				t.Errorf("%s got %v, want %v", name, got, want)
				return
			}
		}
	}
	time.Sleep(300 * time.Millisecond) // let anything unwanted arrive too
	wantSet("terminal", types(terminal, 3), "request.succeeded "+a, "request.failed "+bid, "request.cancelled "+c)
	wantSet("early", types(early, 4), "request.created "+a, "request.processing "+a, "request.created "+bid, "request.created "+c)
	wantSet("failures", types(failures, 1), "request.failed "+bid)
	for _, g := range early.all() {
		if g.msg.Type == "request.processing" && (g.msg.Data.Version != 2 || string(g.msg.Data.Progress) != `{"percent":0}`) {
			t.Errorf("processing message carries version %d progress %s, want the state at the transition (2, percent 0)", g.msg.Data.Version, g.msg.Data.Progress)
		}
	}
}

// TestRetriesKeepOneWebhookID: a receiver that fails twice and then accepts gets
// three attempts of one message, all with the same webhook-id, each signed for
// its own timestamp; the deliveries listing shows all three, newest first.
func TestRetriesKeepOneWebhookID(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b.Client(t), testenv.Isolate(t))
		rcv := newReceiver(t, func(n int, _ string) int {
			if n <= 2 {
				return 503
			}
			return 200
		})
		w := f.register("acme", rcv.url())
		rcv.setSecret(w.Secret)
		f.startDispatcher(nil)
		id := f.create("acme")
		f.complete("acme", id)

		got := rcv.waitFor("three attempts", 10*time.Second, func(g []received) bool { return len(g) >= 3 })
		waitUntil(t, "the outbox to empty", func() bool { return f.outboxLen("acme") == 0 && f.retriesLen("acme") == 0 })
		time.Sleep(300 * time.Millisecond)
		got = rcv.all()
		if len(got) != 3 {
			t.Fatalf("%d attempts, want 3", len(got))
		}
		for i, g := range got {
			if g.id != got[0].id || g.verifyErr != nil {
				t.Errorf("attempt %d: id %q (first %q), verify %v", i+1, g.id, got[0].id, g.verifyErr)
			}
			if string(g.body) != string(got[0].body) {
				t.Errorf("attempt %d body differs", i+1)
			}
		}
		if gap := got[1].at.Sub(got[0].at); gap < 90*time.Millisecond {
			t.Errorf("first retry after %s, want the 100ms step", gap)
		}
		if gap := got[2].at.Sub(got[1].at); gap < 190*time.Millisecond {
			t.Errorf("second retry after %s, want the 200ms step", gap)
		}
		ds := f.deliveries("acme", w.ID)
		if len(ds) != 3 {
			t.Fatalf("deliveries %+v", ds)
		}
		for i, want := range []struct {
			attempt int
			state   string
			status  int
			next    bool
		}{{3, domain.DeliveryDelivered, 200, false}, {2, domain.DeliveryRetrying, 503, true}, {1, domain.DeliveryRetrying, 503, true}} {
			d := ds[i]
			if d.Attempt != want.attempt || d.State != want.state || d.HTTPStatus == nil || *d.HTTPStatus != want.status ||
				(d.NextAttemptAt != nil) != want.next || d.MessageID != got[0].id || d.Error == "" && want.status != 200 {
				t.Errorf("delivery %d: %+v, want %+v", i, d, want)
			}
		}
	})
}

// TestFinalFailureVisible: after the last step the message is failed: no more
// attempts, the listing says so, and the outbox and retry schedule are empty.
func TestFinalFailureVisible(t *testing.T) {
	f := newFixture(t, backends()[0].Client(t), testenv.Isolate(t))
	rcv := newReceiver(t, func(int, string) int { return 500 })
	w := f.register("acme", rcv.url())
	rcv.setSecret(w.Secret)
	f.startDispatcher(func(o *webhook.DispatcherOptions) {
		o.RetrySchedule = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond}
	})
	f.complete("acme", f.create("acme"))
	rcv.waitFor("three attempts", 10*time.Second, func(g []received) bool { return len(g) >= 3 })
	waitUntil(t, "the message to be failed", func() bool {
		ds := f.deliveries("acme", w.ID)
		return len(ds) == 3 && ds[0].State == domain.DeliveryFailed
	})
	time.Sleep(300 * time.Millisecond)
	if n := len(rcv.all()); n != 3 {
		t.Fatalf("%d attempts, want 3 (1 + 2 retries)", n)
	}
	ds := f.deliveries("acme", w.ID)
	if ds[0].Attempt != 3 || ds[0].NextAttemptAt != nil || ds[0].HTTPStatus == nil || *ds[0].HTTPStatus != 500 {
		t.Fatalf("final attempt %+v", ds[0])
	}
	if f.outboxLen("acme") != 0 || f.retriesLen("acme") != 0 {
		t.Fatalf("outbox %d, retries %d after the final failure", f.outboxLen("acme"), f.retriesLen("acme"))
	}
}

// TestDeliveredAfterRestart: a transition's message is in Redis as soon as the
// transition is; a process killed right after it (no dispatcher ever ran)
// loses nothing: the dispatcher of the next process delivers it.
func TestDeliveredAfterRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		rdb := b.Client(t)
		prefix := testenv.Isolate(t)
		first := newFixture(t, rdb, prefix)
		rcv := newReceiver(t, nil)
		w := first.register("acme", rcv.url(), domain.EventCreated, domain.EventSucceeded)
		rcv.setSecret(w.Secret)
		id := first.create("acme")
		first.complete("acme", id)
		if n := first.outboxLen("acme"); n != 2 {
			t.Fatalf("outbox holds %d entries right after the transitions, want 2", n)
		}
		// "Restart": a new store, service and dispatcher, with the same configuration.
		next := newFixture(t, rdb, prefix)
		next.startDispatcher(nil)
		got := rcv.waitFor("both messages", 10*time.Second, func(g []received) bool { return len(g) >= 2 })
		ids := countIDs(got)
		if ids["msg_"+id+"_q"] != 1 || ids["msg_"+id+"_s"] != 1 {
			t.Fatalf("received %v", ids)
		}
		for _, g := range got {
			if g.verifyErr != nil {
				t.Fatal(g.verifyErr)
			}
		}
	})
}

// TestTwoReplicasDeliverOnce: two replicas' dispatchers on one Redis deliver
// every message exactly once when all goes well; with a receiver that fails
// each message's first attempt, each message is attempted exactly twice.
func TestTwoReplicasDeliverOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const n = 60
		for _, failFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("failFirst=%v", failFirst), func(t *testing.T) {
				a := newFixture(t, b.Client(t), testenv.Isolate(t))
				bb := a.replica()
				rcv := newReceiver(t, func(k int, _ string) int {
					if failFirst && k == 1 {
						return 502
					}
					return 200
				})
				rcv.setSecret(a.register("acme", rcv.url()).Secret)
				da, _ := a.startDispatcher(nil)
				db, _ := bb.startDispatcher(nil)
				var wg sync.WaitGroup
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						f := a
						if i%2 == 1 {
							f = bb
						}
						f.complete("acme", f.create("acme"))
					}(i)
				}
				wg.Wait()
				per := 1
				if failFirst {
					per = 2
				}
				rcv.waitFor("every attempt", 20*time.Second, func(g []received) bool { return len(g) >= n*per })
				waitUntil(t, "the outbox to empty", func() bool { return a.outboxLen("acme") == 0 && a.retriesLen("acme") == 0 })
				time.Sleep(300 * time.Millisecond)
				ids := countIDs(rcv.all())
				if len(ids) != n {
					t.Fatalf("%d distinct messages, want %d", len(ids), n)
				}
				for id, c := range ids {
					if c != per {
						t.Errorf("%s attempted %d times, want %d", id, c, per)
					}
				}
				sa, sb := da.Stats(), db.Stats()
				if sa.Delivered+sb.Delivered != n {
					t.Errorf("delivered %d + %d, want %d", sa.Delivered, sb.Delivered, n)
				}
				t.Logf("replica a delivered %d, replica b %d", sa.Delivered, sb.Delivered)
			})
		}
	})
}

// TestTakeOverFromDeadReplica: a replica that read a message and died before
// settling it (its consumer never comes back) leaves it pending; another
// replica takes it over once it is idle longer than ClaimIdle and delivers it.
func TestTakeOverFromDeadReplica(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b.Client(t), testenv.Isolate(t))
		rcv := newReceiver(t, nil)
		rcv.setSecret(f.register("acme", rcv.url()).Secret)
		id := f.create("acme")
		f.complete("acme", id)
		// The dying replica: reads through the group, then nothing.
		msgs, err := f.st.ReadOutbox(context.Background(), "dead-replica", map[domain.ShardName]int{"acme": 10})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("read %d messages: %v", len(msgs), err)
		}
		read := time.Now() // just after the read: its idle clock started a little earlier
		other := f.replica()
		other.startDispatcher(func(o *webhook.DispatcherOptions) { o.ClaimIdle = 500 * time.Millisecond })
		got := rcv.waitFor("the taken-over message", 10*time.Second, func(g []received) bool { return len(g) >= 1 })
		if took := got[0].at.Sub(read); took < 450*time.Millisecond {
			t.Fatalf("taken over after %s, before ClaimIdle", took)
		}
		if got[0].id != "msg_"+id+"_s" || got[0].verifyErr != nil {
			t.Fatalf("got %q %v", got[0].id, got[0].verifyErr)
		}
		waitUntil(t, "the outbox to empty", func() bool { return f.outboxLen("acme") == 0 })
		pending, err := f.rdb.XPending(context.Background(), f.prefix+":{acme}:ob", "dispatch").Result()
		if err != nil || pending.Count != 0 {
			t.Fatalf("pending %+v %v", pending, err)
		}
	})
}

// TestRetryLeaseTakeOver: a replica that claimed a retry and died leaves it
// leased; once the lease runs out another replica sends it.
func TestRetryLeaseTakeOver(t *testing.T) {
	f := newFixture(t, backends()[1].Client(t), testenv.Isolate(t))
	rcv := newReceiver(t, func(n int, _ string) int {
		if n == 1 {
			return 500
		}
		return 200
	})
	rcv.setSecret(f.register("acme", rcv.url()).Secret)
	d, stop := f.startDispatcher(nil)
	f.complete("acme", f.create("acme"))
	rcv.waitFor("the first attempt", 10*time.Second, func(g []received) bool { return len(g) >= 1 })
	waitUntil(t, "the retry to be scheduled", func() bool { return f.retriesLen("acme") == 1 && d.Stats().Retrying == 1 })
	stop()
	// The dying replica claims the due retry with a lease and never settles it.
	time.Sleep(150 * time.Millisecond)
	now := time.Now()
	claimed, err := f.st.ClaimWebhookRetries(context.Background(), []domain.ShardName{"acme"}, now, now.Add(time.Second), 10)
	if err != nil || len(claimed) != 1 || claimed[0].Attempt != 2 {
		t.Fatalf("claimed %+v %v", claimed, err)
	}
	other := f.replica()
	other.startDispatcher(nil)
	time.Sleep(500 * time.Millisecond)
	// counted by when they arrived: on a loaded machine starting the other
	// replica may take the lease's whole second, after which a retry is due
	held := 0
	for _, g := range rcv.all() {
		if g.at.Before(now.Add(time.Second)) {
			held++
		}
	}
	if held != 1 {
		t.Fatalf("%d attempts while the lease held, want 1", held)
	}
	got := rcv.waitFor("the retry after the lease", 10*time.Second, func(g []received) bool { return len(g) >= 2 })
	if got[1].at.Sub(now) < time.Second || got[1].id != got[0].id {
		t.Fatalf("retry at +%s with id %q (first %q)", got[1].at.Sub(now), got[1].id, got[0].id)
	}
}

// TestDeliveryRefusesRebinding: a name that resolved to a public address when
// the endpoint was registered and to loopback when a message is sent is not
// dialled; the attempt fails and says why.
func TestDeliveryRefusesRebinding(t *testing.T) {
	f := newFixture(t, backends()[0].Client(t), testenv.Isolate(t))
	rcv := newReceiver(t, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(rcv.srv.URL, "http://"))
	res := newResolver("partner.example", "93.184.216.34")
	f.guard = &webhook.Guard{AllowHTTP: true, Resolver: res} // private addresses refused
	sealer, _ := webhook.NewSealer(testKey)
	f.svc = webhook.NewService(f.st, f.guard, sealer, nil)
	w := f.register("acme", "http://partner.example:"+port+"/hook")
	res.set("partner.example", "127.0.0.1") // rebinding
	f.startDispatcher(func(o *webhook.DispatcherOptions) { o.RetrySchedule = []time.Duration{time.Hour} })
	f.complete("acme", f.create("acme"))
	waitUntil(t, "the refused attempt", func() bool { return len(f.deliveries("acme", w.ID)) == 1 })
	d := f.deliveries("acme", w.ID)[0]
	if d.State != domain.DeliveryRetrying || d.HTTPStatus != nil || !strings.Contains(d.Error, "not allowed") {
		t.Fatalf("attempt %+v", d)
	}
	if n := len(rcv.all()); n != 0 {
		t.Fatalf("the loopback receiver was reached %d times", n)
	}
	// And a literal internal address cannot be registered at all.
	_, err := f.svc.RegisterWebhook(context.Background(), domain.Call{Tenant: "acme"}, domain.WebhookInput{URL: rcv.url(), Events: domain.DefaultWebhookEvents})
	if domain.ErrorCode(err) != domain.ValidationFailed {
		t.Fatalf("registering %s: %v", rcv.url(), err)
	}
}

// TestDeletedEndpointDropsMessages: messages queued for an endpoint that is
// deleted are dropped, not delivered, and leave the outbox.
func TestDeletedEndpointDropsMessages(t *testing.T) {
	f := newFixture(t, backends()[0].Client(t), testenv.Isolate(t))
	rcv := newReceiver(t, nil)
	w := f.register("acme", rcv.url())
	f.complete("acme", f.create("acme"))
	if err := f.svc.DeleteWebhook(context.Background(), domain.Call{Tenant: "acme"}, w.ID); err != nil {
		t.Fatal(err)
	}
	d, _ := f.startDispatcher(nil)
	waitUntil(t, "the message to be dropped", func() bool { return d.Stats().Dropped == 1 && f.outboxLen("acme") == 0 })
	if n := len(rcv.all()); n != 0 {
		t.Fatalf("delivered %d messages to a deleted endpoint", n)
	}
	// A tenant left without endpoints leaves the registry in time (pruned).
	if pruned, err := f.st.PruneWebhookTenant(context.Background(), "acme"); err != nil || !pruned {
		t.Fatalf("prune: %v %v", pruned, err)
	}
	ts, _ := f.st.WebhookTenants(context.Background())
	if len(ts) != 0 {
		t.Fatalf("registry still holds %+v", ts)
	}
	// Registering again brings it back, and delivery works again.
	rcv.setSecret(f.register("acme", rcv.url()).Secret)
	f.complete("acme", f.create("acme"))
	rcv.waitFor("a delivery after re-registering", 10*time.Second, func(g []received) bool { return len(g) == 1 })
}

// TestFrozenTenantPaused: a frozen tenant's messages wait, and go out once it is
// unfrozen.
func TestFrozenTenantPaused(t *testing.T) {
	f := newFixture(t, backends()[0].Client(t), testenv.Isolate(t))
	rcv := newReceiver(t, nil)
	rcv.setSecret(f.register("acme", rcv.url()).Secret)
	id := f.create("acme")
	ctx := context.Background()
	if err := f.st.SetFrozen(ctx, "acme", true); err != nil {
		t.Fatal(err)
	}
	f.complete("acme", id) // transitions are still accepted while frozen
	f.startDispatcher(nil)
	time.Sleep(400 * time.Millisecond)
	if n := len(rcv.all()); n != 0 {
		t.Fatalf("%d deliveries while frozen", n)
	}
	if err := f.st.SetFrozen(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	rcv.waitFor("the delivery after unfreezing", 10*time.Second, func(g []received) bool { return len(g) == 1 })
}

// TestTimeoutIsAFailure: a receiver slower than webhooks.timeout is a failed
// attempt, even if it answers 2xx later.
func TestTimeoutIsAFailure(t *testing.T) {
	f := newFixture(t, backends()[0].Client(t), testenv.Isolate(t))
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
		w.WriteHeader(200)
	}))
	defer slow.Close()
	w := f.register("acme", slow.URL)
	f.startDispatcher(func(o *webhook.DispatcherOptions) {
		o.Timeout = 200 * time.Millisecond
		o.RetrySchedule = []time.Duration{time.Hour}
	})
	f.complete("acme", f.create("acme"))
	waitUntil(t, "the timed-out attempt", func() bool { return len(f.deliveries("acme", w.ID)) == 1 })
	d := f.deliveries("acme", w.ID)[0]
	if d.State != domain.DeliveryRetrying || d.HTTPStatus != nil || !strings.Contains(d.Error, "no answer within") || d.DurationMs > 1500 {
		t.Fatalf("attempt %+v", d)
	}
}

// TestRedirectNotFollowed: a 3xx is a failed attempt; the target is never asked.
func TestRedirectNotFollowed(t *testing.T) {
	f := newFixture(t, backends()[0].Client(t), testenv.Isolate(t))
	target := newReceiver(t, nil)
	redirect := httptest.NewServer(http.RedirectHandler(target.url(), http.StatusTemporaryRedirect))
	defer redirect.Close()
	w := f.register("acme", redirect.URL)
	f.startDispatcher(func(o *webhook.DispatcherOptions) { o.RetrySchedule = []time.Duration{time.Hour} })
	f.complete("acme", f.create("acme"))
	waitUntil(t, "the redirected attempt", func() bool { return len(f.deliveries("acme", w.ID)) == 1 })
	d := f.deliveries("acme", w.ID)[0]
	if d.State != domain.DeliveryRetrying || d.HTTPStatus == nil || *d.HTTPStatus != 307 {
		t.Fatalf("attempt %+v", d)
	}
	if len(target.all()) != 0 {
		t.Fatal("the redirect was followed")
	}
}

// TestRedisAway: while Redis does not answer, the dispatcher keeps trying
// quietly (one warning, no busy loop) and the queued message waits in Redis;
// when Redis is back it is delivered without a restart.
func TestRedisAway(t *testing.T) {
	proc := testenv.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	f := newFixtureWith(t, rdb, store.Options{Prefix: testenv.Isolate(t), OpTimeout: 300 * time.Millisecond, Retention: time.Hour})
	rcv := newReceiver(t, nil)
	rcv.setSecret(f.register("acme", rcv.url()).Secret)
	queued := f.create("acme")
	f.complete("acme", queued)

	proc.Pause()
	var logs testenv.Buffer
	d, _ := f.startDispatcher(func(o *webhook.DispatcherOptions) {
		o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	time.Sleep(2 * time.Second)
	st := d.Stats()
	if st.StoreErrors == 0 || st.Attempts != 0 {
		t.Fatalf("stats while Redis is away: %+v", st)
	}
	if n := strings.Count(logs.String(), "store call failed"); n != 1 {
		t.Fatalf("%d warnings while Redis was away, want 1:\n%s", n, logs.String())
	}
	if st.StoreErrors > 40 {
		t.Fatalf("%d failed store calls in 2s: a busy loop", st.StoreErrors)
	}
	proc.Resume()
	got := rcv.waitFor("the queued message", 15*time.Second, func(g []received) bool { return len(g) >= 1 })
	if got[0].id != "msg_"+queued+"_s" || got[0].verifyErr != nil {
		t.Fatalf("got %q %v", got[0].id, got[0].verifyErr)
	}
	second := f.create("acme")
	f.complete("acme", second)
	rcv.waitFor("a message after the outage", 10*time.Second, func(g []received) bool { return len(g) >= 2 })
}

// TestSlowTenantDoesNotStarveOthers: a tenant whose receiver hangs until the
// timeout takes no more than MaxPerTenant of the slots; another tenant's
// messages go out meanwhile.
func TestSlowTenantDoesNotStarveOthers(t *testing.T) {
	f := newFixture(t, backends()[1].Client(t), testenv.Isolate(t))
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release) // before the server closes: it waits for its handlers
	f.register("slow", slow.URL)
	fast := newReceiver(t, nil)
	fast.setSecret(f.register("fast", fast.url()).Secret)
	for i := 0; i < 30; i++ {
		f.complete("slow", f.create("slow"))
	}
	d, stop := f.startDispatcher(func(o *webhook.DispatcherOptions) {
		o.Timeout, o.Concurrency, o.MaxPerTenant = 3*time.Second, 8, 2
		o.RetrySchedule = []time.Duration{time.Hour}
	})
	time.Sleep(300 * time.Millisecond) // the slow tenant's attempts are hanging now
	start := time.Now()
	for i := 0; i < 10; i++ {
		f.complete("fast", f.create("fast"))
	}
	fast.waitFor("the fast tenant's messages", 10*time.Second, func(g []received) bool { return len(g) >= 10 })
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the fast tenant waited %s behind the slow one", took)
	}
	waitUntil(t, "the fast deliveries to settle", func() bool { return d.Stats().Delivered == 10 })
	if st := d.Stats(); st.Attempts != 10 {
		t.Fatalf("stats %+v: the slow tenant's attempts should all still hang", st)
	}
	stop()
}
