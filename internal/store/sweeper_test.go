package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
)

// quiet is a logger for sweepers under test.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)) }

func (f *fixture) sweeper(o sweep.Options) *sweep.Sweeper {
	if o.Log == nil {
		o.Log = quiet()
	}
	return sweep.New(f.s, o)
}

func mustTick(tb testing.TB, w *sweep.Sweeper) sweep.Stats {
	tb.Helper()
	if err := w.Tick(ctx); err != nil {
		tb.Fatalf("tick: %v", err)
	}
	return w.Stats()
}

// catchUp sets the fake clock to the wall clock (real Redis TTLs run on the latter).
func (f *fixture) catchUp() { f.clock.Add(time.Since(f.clock.Now())) }

// tenantKeys lists every key of a tenant, in every shard, on every master of
// a cluster.
func (f *fixture) tenantKeys(tb testing.TB, tenant string) []string {
	tb.Helper()
	var mu sync.Mutex
	var out []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		for _, tag := range store.TenantTags(f.s, tenant) {
			it := c.Scan(ctx, 0, f.prefix+":"+strings.ReplaceAll(tag, ":", "[:]")+":*", 1000).Iterator()
			for it.Next(ctx) {
				mu.Lock()
				out = append(out, it.Val())
				mu.Unlock()
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := f.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, f.rdb)
	}
	if err != nil {
		tb.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestSweeperTimesOut(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) {
			o.QueuedTimeout = time.Minute
			o.QueuedTimeoutByType = map[string]time.Duration{"patient": time.Hour}
			o.ProcessingTimeout = 10 * time.Second
			o.ProcessingTimeoutByType = map[string]time.Duration{"slow": time.Minute}
		})
		f.catchUp()
		q := f.mustCreate(t, "acme", "x")
		patient := f.mustCreate(t, "acme", "patient")
		p := f.mustCreate(t, "acme", "x")
		slow := f.mustCreate(t, "acme", "slow")
		for _, id := range []string{p.ID, slow.ID} {
			if _, err := f.s.MarkProcessing(ctx, tp("acme", id), domain.ProgressInput{}); err != nil {
				t.Fatal(err)
			}
		}
		w := f.sweeper(sweep.Options{})
		if st := mustTick(t, w); st.Expired+st.Failed != 0 || st.Runs != 1 || st.LastLag != 0 {
			t.Fatalf("nothing is due yet: %+v", st)
		}

		f.clock.Add(11 * time.Second)
		// a heartbeat within the timeout keeps a request alive
		if _, err := f.s.MarkProcessing(ctx, tp("acme", slow.ID), domain.ProgressInput{}); err != nil {
			t.Fatal(err)
		}
		st := mustTick(t, w)
		if st.Failed != 1 || st.Expired != 0 || st.LastLag < time.Second {
			t.Fatalf("processing timeout: %+v", st)
		}
		got := f.mustGet(t, "acme", p.ID)
		if got.Status != domain.StatusFailed || !strings.Contains(string(got.Failure), `"ERR_JOB_EXECUTION_TIMED_OUT"`) ||
			got.Events[len(got.Events)-1].By != store.SystemActor || got.ExpiresAt == nil {
			t.Fatalf("timed out: %+v", got)
		}

		f.clock.Add(time.Minute)
		st = mustTick(t, w)
		if st.Expired != 1 || st.Failed != 2 {
			t.Fatalf("queued and per-type processing timeouts: %+v", st)
		}
		got = f.mustGet(t, "acme", q.ID)
		if got.Status != domain.StatusExpired || !strings.Contains(string(got.Failure), `"REQUEST_EXPIRED"`) {
			t.Fatalf("expired: %+v", got)
		}
		if got := f.mustGet(t, "acme", patient.ID); got.Status != domain.StatusQueued {
			t.Fatalf("per-type queued timeout ignored: %+v", got)
		}
		if n := f.sumCard(t, "acme", ":dl"); n != 0 {
			t.Fatalf("deadline set holds %d entries, want none: only processing requests have one", n)
		}
		if !zscore(t, f.rdb, f.key("acme", patient.ID, ":ix:q:patient"), patient.ID) {
			t.Fatal("the patient request left the queued index")
		}
		f.clock.Add(time.Hour)
		if st := mustTick(t, w); st.Expired != 2 {
			t.Fatalf("patient request: %+v", st)
		}
	})
}

func TestSweeperRetentionRemovesEveryKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const keep = 400 * time.Millisecond
		f := newFixture(t, b, func(o *store.Options) {
			o.Retention = keep
			o.QueuedTimeoutByType = map[string]time.Duration{"stale": time.Millisecond}
		})
		alive := f.mustCreate(t, "acme", "x")
		var gone []string
		for _, st := range []domain.Status{domain.StatusSucceeded, domain.StatusFailed, domain.StatusCancelled} {
			r := f.mustCreate(t, "acme", "x")
			if _, err := f.s.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{}); err != nil {
				t.Fatal(err)
			}
			_, _, _ = pollOf(f.s, "acme", r.ID, "key_p") // leaves pacing state (pc:<id>) to clean up
			// Redis expires the record at the store clock's time + keep: the
			// clock must not lag the wall clock by the fixture's start-up.
			f.catchUp()
			f.moveTo(t, "acme", r.ID, st)
			gone = append(gone, r.ID)
		}
		stale := f.mustCreate(t, "acme", "stale")
		time.Sleep(5 * time.Millisecond)
		f.catchUp()
		f.moveTo(t, "acme", stale.ID, domain.StatusExpired)
		gone = append(gone, stale.ID)
		for _, id := range gone {
			if got := f.mustGet(t, "acme", id); got.ExpiresAt == nil || got.ExpiresAt.Sub(got.CompletedAt.Time) != keep {
				t.Fatalf("expires_at %v, completed_at %v", got.ExpiresAt, got.CompletedAt)
			}
		}

		time.Sleep(keep + 100*time.Millisecond)
		f.catchUp()
		if b.Name != "miniredis" { // miniredis TTLs fire only when fast-forwarded
			for _, id := range gone {
				if n := f.rdb.Exists(ctx, f.key("acme", id, ":r:"+id)).Val(); n != 0 {
					t.Fatalf("record %s outlived its TTL", id)
				}
			}
		}
		// before any sweep: gone for every reader
		p, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}})
		if err != nil || len(p.Items) != 1 || p.Items[0].ID != alive.ID {
			t.Fatalf("listing shows gone records: %+v %v", p, err)
		}
		for _, id := range gone {
			_, _, err := pollOf(f.s, "acme", id, "")
			wantCode(t, err, domain.NotFound)
		}

		w := f.sweeper(sweep.Options{})
		if st := mustTick(t, w); st.Cleaned != int64(len(gone)) {
			t.Fatalf("cleaned %d, want %d", st.Cleaned, len(gone))
		}
		// What is left is the live request's: its record and index entries, and
		// its index's head summary. a queued request has no deadline entry; the
		// meta hash of each shard that took a create stays (its type flags)
		want := []string{f.key("acme", alive.ID, ":ix:q:x"), f.key("acme", alive.ID, ":r:"+alive.ID), f.key("acme", alive.ID, ":ixh:q")}
		for _, id := range append([]string{alive.ID}, gone...) {
			if m := f.key("acme", id, ":m"); !slices.Contains(want, m) {
				want = append(want, m)
			}
		}
		sort.Strings(want)
		if got := f.tenantKeys(t, "acme"); !slices.Equal(got, want) {
			t.Fatalf("keys left:\n%v\nwant\n%v", got, want)
		}
		for _, k := range []string{":ix:q:x"} {
			if m := f.rdb.ZRange(ctx, f.key("acme", alive.ID, k), 0, -1).Val(); !slices.Equal(m, []string{alive.ID}) {
				t.Fatalf("%s holds %v", k, m)
			}
		}
		if st := mustTick(t, w); st.Cleaned != int64(len(gone)) {
			t.Fatalf("a second tick found more to clean: %+v", st)
		}
	})
}

func TestTwoSweepersAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) {
			o.QueuedTimeout = time.Minute
			o.ProcessingTimeout = time.Minute
		})
		f.catchUp()
		var queued, processing []string
		for i := range 40 {
			r := f.mustCreate(t, "acme", "x")
			if i%3 == 0 {
				f.moveTo(t, "acme", r.ID, domain.StatusProcessing)
				processing = append(processing, r.ID)
			} else {
				queued = append(queued, r.ID)
			}
		}
		queued = append(queued, f.mustCreate(t, "globex", "x").ID) // every tenant is swept
		f.clock.Add(2 * time.Minute)

		// Two replicas: two stores over separate connections, one sweeper each.
		other, err := store.New(f.rdb, store.Options{Prefix: f.prefix, TenantShards: f.shards, OpTimeout: 5 * time.Second, Now: f.clock.Now,
			QueuedTimeout: time.Minute, ProcessingTimeout: time.Minute, Retention: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ws := []*sweep.Sweeper{f.sweeper(sweep.Options{Batch: 7}), sweep.New(other, sweep.Options{Batch: 7, Log: quiet()})}
		for round := 0; round < 10; round++ {
			var wg sync.WaitGroup
			errs := make([]error, len(ws))
			for i, w := range ws {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = w.Tick(ctx) }()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		a, c := ws[0].Stats(), ws[1].Stats()
		if a.Expired+c.Expired != int64(len(queued)) || a.Failed+c.Failed != int64(len(processing)) {
			t.Fatalf("timed out %d+%d expired and %d+%d failed, want %d and %d", a.Expired, c.Expired, a.Failed, c.Failed, len(queued), len(processing))
		}
		for i, id := range append(slices.Clone(queued), processing...) {
			tenant := "acme"
			if i == len(queued)-1 {
				tenant = "globex"
			}
			got := f.mustGet(t, tenant, id)
			var terminal int
			for _, ev := range got.Events {
				if ev.To.Terminal() {
					terminal++
				}
			}
			if terminal != 1 || !got.Done {
				t.Fatalf("%s: %d terminal transitions: %+v", id, terminal, got.Events)
			}
		}
	})
}

func TestSweeperBatchAndStaleEntries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) { o.QueuedTimeout = time.Minute })
		f.catchUp()
		for range 7 {
			f.mustCreateIn0(t, "acme", "x") // one shard's batch: the ghosts' shard
		}
		// entries whose record is gone (or never was) are dropped
		ghost := uuid.Must(uuid.NewV7()).String()
		f.rdb.ZAdd(ctx, f.prefix+":{acme}:dl", redis.Z{Score: 1, Member: ghost})
		f.rdb.ZAdd(ctx, f.prefix+":{acme}:ix:q:x", redis.Z{Score: 1, Member: ghost})
		f.rdb.RPush(ctx, f.prefix+":{acme}:rb:1", "garbage", "s"+ghost)
		f.rdb.ZAdd(ctx, f.prefix+":{acme}:rbi", redis.Z{Score: 1, Member: "1"})
		f.clock.Add(2 * time.Minute)
		w := f.sweeper(sweep.Options{Batch: 3})
		st := mustTick(t, w)
		if st.Expired != 2 { // the ghost is the longest due entry and takes a place in the batch
			t.Fatalf("first tick: %+v", st)
		}
		if zscore(t, f.rdb, f.prefix+":{acme}:dl", ghost) || zscore(t, f.rdb, f.prefix+":{acme}:ix:q:x", ghost) ||
			zscore(t, f.rdb, f.prefix+":{acme}:rbi", "1") || f.rdb.Exists(ctx, f.prefix+":{acme}:rb:1").Val() != 0 {
			t.Fatal("stale entries survived")
		}
		for _, want := range []int64{5, 7, 7} {
			if st := mustTick(t, w); st.Expired != want {
				t.Fatalf("expired %d, want %d", st.Expired, want)
			}
		}
	})
}

func TestSweeperRedisDown(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	s, err := store.New(rdb, store.Options{Prefix: "down", OpTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	w := sweep.New(s, sweep.Options{Interval: 100 * time.Millisecond, Log: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	err = w.Tick(ctx)
	if domain.ErrorCode(err) != domain.BackendUnavailable {
		t.Fatalf("tick with Redis down: %v", err)
	}
	if st := w.Stats(); st.Runs != 1 || st.Errors != 1 || st.LastError == "" {
		t.Fatalf("stats %+v", st)
	}
	// One second at 100 ms intervals: it must keep ticking (at least 2) and not
	// spin (a busy loop would make hundreds); wide bounds for a loaded CI machine.
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	done := make(chan struct{})
	go func() { w.Run(cctx); close(done) }()
	<-done
	cancel()
	st := w.Stats()
	if st.Runs < 2 || st.Runs > 14 || st.Errors != st.Runs {
		t.Fatalf("Run with Redis down: %+v (want one tick per interval)", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "sweeper tick failed"); n != 1 {
		t.Fatalf("%d error lines, want 1 (rate-limited):\n%s", n, logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestSweeperKeepsUpWithRealTime runs the sweeper as serve does (Run, real clock)
// with short timers and retention: requests time out, and their records and index
// entries are gone within two sweep intervals of their expiry.
func TestSweeperKeepsUpWithRealTime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const interval = 100 * time.Millisecond
		f := newFixture(t, b, func(o *store.Options) {
			o.Now = time.Now
			o.QueuedTimeout = 200 * time.Millisecond
			o.Retention = 300 * time.Millisecond
		})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		w := f.sweeper(sweep.Options{Interval: interval})
		go func() { w.Run(rctx); close(done) }()
		defer func() { cancel(); <-done }()
		var ids []string
		for range 5 {
			ids = append(ids, f.mustCreate(t, "acme", "x").ID)
		}
		// queued timeout, then up to one interval (+10% jitter) to notice it;
		// retention, then up to two intervals to clean; plus slack for slow CI.
		deadline := time.Now().Add(200*time.Millisecond + 300*time.Millisecond + 3*(interval+interval/10) + 3*time.Second)
		for {
			// the tenant's meta hash stays (its flags and types: bytes per type, not per request)
			keys := slices.DeleteFunc(f.tenantKeys(t, "acme"), func(k string) bool { return strings.HasSuffix(k, ":m") })
			if len(keys) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("keys left after timeout, retention and two sweep intervals: %v (stats %+v)", keys, w.Stats())
			}
			time.Sleep(20 * time.Millisecond)
		}
		// the counters are updated when the tick that did the work ends
		for st := w.Stats(); st.Expired != int64(len(ids)) || st.Cleaned != int64(len(ids)); st = w.Stats() {
			if time.Now().After(deadline.Add(time.Second)) {
				t.Fatalf("stats %+v", st)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestSweeperManyTenants(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) { o.QueuedTimeout = time.Minute })
		f.catchUp()
		const n = 130 // more than one SSCAN page and many pipelines
		for i := range n {
			f.mustCreate(t, fmt.Sprintf("tenant-%03d-with-a-long-name-for-long-keys", i), "x")
		}
		f.clock.Add(2 * time.Minute)
		if st := mustTick(t, f.sweeper(sweep.Options{})); st.Expired != n {
			t.Fatalf("expired %d of %d tenants' requests", st.Expired, n)
		}
	})
}

// TestQueuedTimeoutFollowsConfig: the queued timeout is counted from created_at
// with the timeout configured now, so shortening lifecycle.queued_timeout (or a
// type's override) applies to requests already queued, and lengthening it
// spares them.
func TestQueuedTimeoutFollowsConfig(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) { o.QueuedTimeout = time.Hour })
		f.catchUp()
		short := f.mustCreate(t, "acme", "x")
		typed := f.mustCreate(t, "acme", "quick")
		long := f.mustCreate(t, "acme", "y")
		f.clock.Add(2 * time.Minute)
		if st := mustTick(t, f.sweeper(sweep.Options{})); st.Expired != 0 {
			t.Fatalf("nothing is due under a 1h timeout: %+v", st)
		}
		// a replica restarted with a shorter timeout, and one type's override
		later, err := store.New(f.rdb, store.Options{Prefix: f.prefix, TenantShards: f.shards, Now: f.clock.Now, OpTimeout: 5 * time.Second,
			QueuedTimeout: time.Minute, QueuedTimeoutByType: map[string]time.Duration{"quick": time.Second, "y": 3 * time.Minute},
			AutoPipeline: b.AutoPipeline})
		if err != nil {
			t.Fatal(err)
		}
		w := sweep.New(later, sweep.Options{Log: quiet()})
		if st := mustTick(t, w); st.Expired != 2 || st.LastLag < 59*time.Second {
			t.Fatalf("the new timeouts: %+v", st)
		}
		for id, want := range map[string]domain.Status{short.ID: domain.StatusExpired, typed.ID: domain.StatusExpired, long.ID: domain.StatusQueued} {
			if got := f.mustGet(t, "acme", id); got.Status != want {
				t.Fatalf("%s is %s, want %s", id, got.Status, want)
			}
		}
		f.clock.Add(time.Minute + time.Second) // created_at is the id's wall-clock time, a little after the fake clock's
		if st := mustTick(t, w); st.Expired != 3 {
			t.Fatalf("the 3m override: %+v", st)
		}
		// a caller's transition of a queued request is never held to the guard
		q := f.mustCreate(t, "acme", "x")
		if _, err := f.s.Complete(ctx, tp("acme", q.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSweeperDropsOldQueuedDeadlines: versions before the queued index timed
// the queued timeout gave each queued request a deadline entry. The sweeper
// still expires such a request when it is due under the current timeout, and
// drops the entry either way, since the queued index now times it.
func TestSweeperDropsOldQueuedDeadlines(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) {
			o.QueuedTimeout = time.Hour
			o.QueuedTimeoutByType = map[string]time.Duration{"x": time.Minute}
		})
		f.catchUp()
		due := f.mustCreate(t, "acme", "x")
		spared := f.mustCreate(t, "acme", "y") // its timeout was lengthened since
		// as the older create.lua wrote them: created_at + the timeout of then
		f.rdb.ZAdd(ctx, f.key("acme", due.ID, ":dl"),
			redis.Z{Score: float64(due.CreatedAt.Add(time.Minute).UnixMilli()), Member: due.ID})
		f.rdb.ZAdd(ctx, f.key("acme", spared.ID, ":dl"),
			redis.Z{Score: float64(spared.CreatedAt.Add(time.Minute).UnixMilli()), Member: spared.ID})
		f.clock.Add(2 * time.Minute)
		w := f.sweeper(sweep.Options{})
		if st := mustTick(t, w); st.Expired != 1 {
			t.Fatalf("one is due under the current timeouts: %+v", st)
		}
		if n := f.sumCard(t, "acme", ":dl"); n != 0 {
			t.Fatalf("%d old deadline entries left", n)
		}
		for id, want := range map[string]domain.Status{due.ID: domain.StatusExpired, spared.ID: domain.StatusQueued} {
			if got := f.mustGet(t, "acme", id); got.Status != want {
				t.Fatalf("%s is %s, want %s", id, got.Status, want)
			}
		}
		f.clock.Add(time.Hour)
		if st := mustTick(t, w); st.Expired != 2 {
			t.Fatalf("the spared one is due from the queued index: %+v", st)
		}
	})
}
