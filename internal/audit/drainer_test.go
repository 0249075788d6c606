package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/audit"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

var ctx = context.Background()

// secretWord is in every context, result, progress message and reason these
// tests write; no audit line may contain it.
const secretWord = "s3cr3t"

// memSink keeps lines in memory and fails while failing is set.
type memSink struct {
	mu      sync.Mutex
	lines   []string
	failing atomic.Bool
	calls   atomic.Int64
}

func (m *memSink) Write(_ context.Context, lines [][]byte) error {
	m.calls.Add(1)
	if m.failing.Load() {
		return errors.New("disk full (test)")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range lines {
		m.lines = append(m.lines, string(l))
	}
	return nil
}

func (m *memSink) Close() error { return nil }

func (m *memSink) all() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.lines...)
}

// replica is one service instance's store and drainer over a shared Redis.
type replica struct {
	s    *store.Store
	d    *audit.Drainer
	sink *memSink
	log  *bytes.Buffer
}

type env struct {
	rdb    redis.UniversalClient
	prefix string
	clock  *testenv.Clock
	b      testenv.Backend
}

// forEachBackend runs f once per backend (testenv.Backends), each with its own env.
func forEachBackend(t *testing.T, f func(t *testing.T, e *env)) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) { f(t, newEnv(t, b)) })
	}
}

func newEnv(t *testing.T, b testenv.Backend) *env {
	return &env{rdb: b.Client(t), prefix: testenv.Isolate(t), clock: testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond)), b: b}
}

// replica starts a store and a running drainer; bound is audit.max_backlog.
func (e *env) replica(t *testing.T, bound int, mod func(*store.Options)) *replica {
	t.Helper()
	o := store.Options{Prefix: e.prefix, OpTimeout: 5 * time.Second, Retention: time.Hour, Now: e.clock.Now,
		RetentionBucket: 100 * time.Millisecond, AutoPipeline: e.b.AutoPipeline, AuditBacklog: bound}
	if mod != nil {
		mod(&o)
	}
	s, err := store.New(e.rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{s: s, sink: &memSink{}, log: &bytes.Buffer{}}
	var logMu sync.Mutex
	r.d, err = audit.NewDrainer(s, audit.Options{Sink: r.sink, Bound: int64(bound), ClaimAfter: 300 * time.Millisecond,
		PollInterval: 50 * time.Millisecond, ReadAllInterval: 50 * time.Millisecond, ScanInterval: 50 * time.Millisecond, Batch: 50,
		Log: slog.New(slog.NewTextHandler(lockedWriter{&logMu, r.log}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.OnAudit(r.d.Nudge)
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.d.Run(dctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lifecycle drives one request of tenant through create, start, a heartbeat
// with progress and completion; it returns the id and the number of events.
func lifecycle(t testing.TB, s *store.Store, tenant string) (string, int) {
	t.Helper()
	r, _, err := s.Create(ctx, domain.CreateParams{
		Call:  domain.Call{Tenant: tenant, By: "key_c"},
		Input: domain.CreateInput{Type: "t.a", Context: json.RawMessage(`{"k":"` + secretWord + `"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: "key_w"}, ID: r.ID}
	prog := domain.ProgressInput{Progress: json.RawMessage(`{"percent":50,"message":"` + secretWord + `"}`)}
	for i := 0; i < 2; i++ {
		if _, err := s.MarkProcessing(ctx, p, prog); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Complete(ctx, p, domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"x":"` + secretWord + `"}`)}); err != nil {
		t.Fatal(err)
	}
	return r.ID, 4
}

// line is an audit line as a consumer reads it: written out here, apart from
// domain.AuditEvent, so that a member added there shows up in parse.
type line struct {
	EventID     string  `json:"event_id"`
	Tenant      string  `json:"tenant"`
	RequestID   string  `json:"request_id"`
	RequestType string  `json:"request_type"`
	Type        string  `json:"type"`
	Seq         int     `json:"seq"`
	From        *string `json:"from"`
	To          *string `json:"to"`
	By          string  `json:"by"`
	At          string  `json:"at"`
	Version     int64   `json:"version"`
	FailureCode string  `json:"failure_code"`
	Count       int64   `json:"count"`
}

// parse decodes lines, failing on any that is not one JSON object, or that
// holds a payload, or a member outside the audit line's.
func parse(t testing.TB, lines []string) []line {
	t.Helper()
	allowed := map[string]bool{"event_id": true, "tenant": true, "request_id": true, "request_type": true, "type": true,
		"seq": true, "from": true, "to": true, "by": true, "at": true, "version": true, "failure_code": true, "count": true}
	out := make([]line, 0, len(lines))
	for _, l := range lines {
		if !strings.HasSuffix(l, "\n") || strings.Count(l, "\n") != 1 {
			t.Fatalf("not one line: %q", l)
		}
		if strings.Contains(l, secretWord) {
			t.Fatalf("audit line holds a payload: %s", l)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &members); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		for k := range members {
			if !allowed[k] {
				t.Fatalf("member %q in %s", k, l)
			}
		}
		var x line
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatal(err)
		}
		out = append(out, x)
	}
	return out
}

// eventually waits until cond holds (10 s at most).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// complete reports whether lines hold every version 1..n of each request in want.
func complete(ls []line, want map[string]int) bool {
	seen := map[string]bool{}
	for _, l := range ls {
		seen[l.EventID] = true
	}
	for id, n := range want {
		for v := 1; v <= n; v++ {
			if !seen[fmt.Sprintf("evt_%s_%d", id, v)] {
				return false
			}
		}
	}
	return true
}

// TestRacingReplicasWriteEveryEvent: two replicas make transitions at once and
// drain at once; every event reaches a sink (by event id) at least once, the
// lines are JSON without payloads, and Redis keeps nothing afterwards.
func TestRacingReplicasWriteEveryEvent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		reps := []*replica{e.replica(t, 10000, nil), e.replica(t, 10000, nil)}
		var mu sync.Mutex
		want := map[string]int{}
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func(r *replica, tenant string) {
				defer wg.Done()
				for j := 0; j < 10; j++ {
					id, n := lifecycle(t, r.s, tenant)
					mu.Lock()
					want[id] = n
					mu.Unlock()
				}
			}(reps[i%2], fmt.Sprintf("t%d", i%3))
		}
		wg.Wait()
		all := func() []line { return parse(t, append(reps[0].sink.all(), reps[1].sink.all()...)) }
		eventually(t, "every event in a sink", func() bool { return complete(all(), want) })
		ls := all()
		dup := 0
		seen := map[string]bool{}
		for _, l := range ls {
			if seen[l.EventID] {
				dup++
			}
			seen[l.EventID] = true
			if l.By != "key_c" && l.By != "key_w" || l.RequestType != "t.a" || !strings.HasPrefix(l.Tenant, "t") {
				t.Fatalf("line %+v", l)
			}
		}
		if len(seen) != 160 {
			t.Fatalf("%d distinct events, want 160", len(seen))
		}
		t.Logf("%d lines, %d duplicates; replica lines %d and %d", len(ls), dup, len(reps[0].sink.all()), len(reps[1].sink.all()))
		for _, tn := range []string{"t0", "t1", "t2"} {
			k := e.prefix + ":{" + tn + "}:au"
			eventually(t, "an empty stream", func() bool { return e.rdb.XLen(ctx, k).Val() == 0 })
		}
	})
}

// TestFailingSinkKeepsEvents: while the sink fails, transitions are answered,
// the backlog waits in Redis and is reported (Stats, Status, the log); once it
// works again every event is written.
func TestFailingSinkKeepsEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replica(t, 10000, nil)
		r.sink.failing.Store(true)
		want := map[string]int{}
		for i := 0; i < 5; i++ {
			id, n := lifecycle(t, r.s, "acme")
			want[id] = n
		}
		eventually(t, "the failure reported", func() bool {
			st := r.d.Stats()
			return !st.SinkUp && st.Backlog == 20 && st.SinkErrors > 0
		})
		ok, detail := r.d.Status()
		if ok || !strings.Contains(detail, "disk full (test)") || !strings.Contains(detail, "20 events wait in Redis") {
			t.Fatalf("status %v %q", ok, detail)
		}
		if len(r.sink.all()) != 0 {
			t.Fatal("a failing sink kept lines")
		}
		r.sink.failing.Store(false)
		eventually(t, "every event written", func() bool { return complete(parse(t, r.sink.all()), want) })
		eventually(t, "the backlog gone", func() bool { st := r.d.Stats(); return st.SinkUp && st.Backlog == 0 })
		if ok, _ := r.d.Status(); !ok {
			t.Fatal("status still failing")
		}
		logged := r.log.String()
		if !strings.Contains(logged, "audit sink failing") || !strings.Contains(logged, "audit sink works again") {
			t.Fatalf("log:\n%s", logged)
		}
	})
}

// TestBacklogBoundReportsDrops: past the bound, transitions still apply and
// the events not recorded are reported to the sink as one audit.dropped line
// per tenant once it works, and counted.
func TestBacklogBoundReportsDrops(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replica(t, 6, nil)
		r.sink.failing.Store(true)
		lifecycle(t, r.s, "acme")
		lifecycle(t, r.s, "acme") // 8 events, 6 recorded
		r.sink.failing.Store(false)
		eventually(t, "the drop reported", func() bool { return r.d.Stats().Dropped == 2 })
		var events, drops int
		for _, l := range parse(t, r.sink.all()) {
			switch l.Type {
			case domain.AuditDropped:
				drops++
				if l.Count != 2 || l.Tenant != "acme" || !strings.HasPrefix(l.EventID, "drop_acme_") {
					t.Fatalf("drop line %+v", l)
				}
			default:
				events++
			}
		}
		if events != 6 || drops != 1 {
			t.Fatalf("%d events and %d drop lines", events, drops)
		}
		if !strings.Contains(r.log.String(), "audit events dropped") {
			t.Fatalf("log:\n%s", r.log.String())
		}
	})
}

// TestRetentionLeavesTheTrail: once retention removed a request (record, events
// and index entries), the sink still has every one of its events.
func TestRetentionLeavesTheTrail(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replica(t, 10000, func(o *store.Options) { o.Retention = time.Minute })
		id, n := lifecycle(t, r.s, "acme")
		e.clock.Add(2 * time.Minute)
		sw := sweep.New(r.s, sweep.Options{Log: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
		if err := sw.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		if sw.Stats().Cleaned != 1 {
			t.Fatalf("sweeper cleaned %d", sw.Stats().Cleaned)
		}
		if _, err := r.s.Events(ctx, "acme", id); domain.ErrorCode(err) != domain.NotFound {
			t.Fatalf("events after retention: %v", err)
		}
		if n := e.rdb.Exists(ctx, e.prefix+":{acme}:r:"+id).Val(); n != 0 {
			t.Fatal("the record outlived retention")
		}
		eventually(t, "every event in the sink", func() bool { return complete(parse(t, r.sink.all()), map[string]int{id: n}) })
		var kinds []string
		for _, l := range parse(t, r.sink.all()) {
			kinds = append(kinds, fmt.Sprintf("%d:%s:%d", l.Version, l.Type, l.Seq))
		}
		if got := strings.Join(kinds, " "); got != "1:request.created:1 2:request.processing:2 3:request.heartbeat:2 4:request.succeeded:3" {
			t.Fatalf("trail %s", got)
		}
	})
}

// TestHealthyReplicaTakesOver: a replica whose sink fails holds what it read;
// another replica takes those entries over after ClaimAfter and writes them,
// while the first keeps failing.
func TestHealthyReplicaTakesOver(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		sick := e.replica(t, 10000, nil)
		sick.sink.failing.Store(true)
		want := map[string]int{}
		for i := 0; i < 3; i++ {
			id, n := lifecycle(t, sick.s, "acme")
			want[id] = n
		}
		eventually(t, "the sick replica to read", func() bool { return sick.sink.calls.Load() > 0 })
		// The sick replica's lease on the stream ends (ClaimAfter, on the
		// stores' clock; real Redis's TTL ends it too).
		e.clock.Add(time.Second)
		well := e.replica(t, 10000, nil)
		eventually(t, "the healthy replica to write every event", func() bool { return complete(parse(t, well.sink.all()), want) })
		if len(sick.sink.all()) != 0 || sick.d.Stats().SinkUp {
			t.Fatal("the failing sink took lines")
		}
	})
}
