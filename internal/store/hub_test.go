package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// scriptCounter counts script calls by name (store.ScriptObserver).
type scriptCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *scriptCounter) ObserveScript(name string, _ time.Duration, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *scriptCounter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// replica is a second Store over the same Redis and prefix: another serve
// replica as far as the hub can tell, since announcements only travel through
// Redis.
func (f *fixture) replica(tb testing.TB) *store.Store {
	tb.Helper()
	s, err := store.New(f.rdb, store.Options{Prefix: f.prefix, TenantShards: f.shards, OpTimeout: 5 * time.Second, Retention: time.Hour,
		Now: f.clock.Now, Schedule: []int{1, 2, 5}, EarlyTolerance: 0.2, RetentionBucket: 100 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func newHub(tb testing.TB, s *store.Store) *store.Hub {
	h := s.NewHub(store.HubOptions{Ping: 200 * time.Millisecond})
	tb.Cleanup(h.Close)
	return h
}

// nextChange waits for a snapshot of wa whose version differs from v (or an
// error), for at most d.
func nextChange(tb testing.TB, wa domain.Watch, v int64, d time.Duration) domain.Snapshot {
	tb.Helper()
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case snap := <-wa.Changes():
			if snap.Err != nil || snap.Request.Version != v {
				return snap
			}
		case <-t.C:
			tb.Fatalf("no change from version %d within %s", v, d)
		}
	}
}

func TestHubWakesOnEveryChange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) { hubWakesOnEveryChange(t, newFixture(t, b, nil)) })
	t.Run("sentinel", func(t *testing.T) {
		hubWakesOnEveryChange(t, newFixture(t, backend{testenv.SentinelBackend(t), suiteShards}, nil))
	})
}

func hubWakesOnEveryChange(t *testing.T, f *fixture) {
	h := newHub(t, f.s)
	other := f.replica(t)
	r := f.mustCreate(t, "acme", "export")
	wa, err := h.Watch(ctx, "acme", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	steps := []struct {
		name string
		do   func() error
		want domain.Status
	}{
		{"processing", func() error {
			_, err := other.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{})
			return err
		}, domain.StatusProcessing},
		{"heartbeat", func() error {
			_, err := other.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{})
			return err
		}, domain.StatusProcessing},
		{"complete", func() error {
			_, err := other.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "confirmation", Result: []byte(`{"confirmed":true}`)})
			return err
		}, domain.StatusSucceeded},
	}
	v := r.Version
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		snap := nextChange(t, wa, v, 5*time.Second)
		if snap.Err != nil || snap.Request.Status != st.want || snap.Request.Version != v+1 {
			t.Fatalf("%s: snapshot %+v err %v, want %s version %d", st.name, snap.Request, snap.Err, st.want, v+1)
		}
		v++
	}
	// a delete wakes the watches of a request that is not terminal
	r2 := f.mustCreate(t, "acme", "export")
	wa2, err := h.Watch(ctx, "acme", r2.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer wa2.Close()
	if err := other.Delete(ctx, "acme", r2.ID); err != nil {
		t.Fatal(err)
	}
	if snap := nextChange(t, wa2, r2.Version, 5*time.Second); domain.ErrorCode(snap.Err) != domain.NotFound {
		t.Fatalf("after delete: %+v, want NOT_FOUND", snap)
	}
	// the sweeper's timeouts announce too
	f2 := f
	r3 := f2.mustCreate(t, "acme", "export")
	wa3, err := h.Watch(ctx, "acme", r3.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer wa3.Close()
	f2.clock.Add(25 * time.Hour)
	if done, err := other.ExpireQueued(ctx, "acme", r3.ID); err != nil || !done {
		t.Fatalf("expire: %v %v", done, err)
	}
	if snap := nextChange(t, wa3, r3.Version, 5*time.Second); snap.Err != nil || snap.Request.Status != domain.StatusExpired {
		t.Fatalf("after timeout: %+v", snap)
	}
	if n := h.Subscriptions(); n < 1 {
		t.Fatalf("subscriptions = %d", n)
	}
}

func TestHubCollapsesReadsOfOneID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var count scriptCounter
		f := newFixture(t, b, func(o *store.Options) { o.ScriptObserver = &count })
		h := newHub(t, f.s)
		r := f.mustCreate(t, "acme", "export")
		const n = 1000
		ws := make([]domain.Watch, n)
		for i := range ws {
			wa, err := h.Watch(ctx, "acme", r.ID)
			if err != nil {
				t.Fatal(err)
			}
			defer wa.Close()
			ws[i] = wa
		}
		before := count.get("poll")
		if _, err := f.replica(t).MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{}); err != nil {
			t.Fatal(err)
		}
		for _, wa := range ws {
			if snap := nextChange(t, wa, r.Version, 5*time.Second); snap.Err != nil || snap.Request.Version != 2 {
				t.Fatalf("snapshot %+v", snap)
			}
		}
		if got := count.get("poll") - before; got != 1 {
			t.Fatalf("%d watches woken by one change cost %d reads, want 1", n, got)
		}
		if h.Watching() != n {
			t.Fatalf("watching %d", h.Watching())
		}
	})
}

// TestHubNoMissedWakeup races a transition against the start of a wait, many
// times at once: whatever the order, a waiter whose first read (made after
// Watch returned) saw the old version must be woken with the new one.
func TestHubNoMissedWakeup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		trials := 10000
		if b.Name == "miniredis" {
			trials = 2000 // one global lock and a Lua VM per call: ~2k scripts/s
		}
		f := newFixture(t, b, nil)
		h := newHub(t, f.s)
		other := f.replica(t)
		tenants := []string{"acme", "globex", "initech", "umbrella"}
		ids := make([]string, trials)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		var failed atomic.Int64
		var firstErr atomic.Value
		fail := func(err error) {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		}
		for i := range ids {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				ids[i] = f.mustCreate(t, tenants[i%len(tenants)], "export").ID
			}()
		}
		wg.Wait()
		var missed, early, rereads atomic.Int64
		for i, id := range ids {
			tenant := tenants[i%len(tenants)]
			wg.Add(2)
			sem <- struct{}{}
			start := make(chan struct{})
			// whether the transition was acknowledged
			transitioned := make(chan bool, 1)
			go func() { // the transition, through the other replica
				defer wg.Done()
				<-start
				_, err := other.MarkProcessing(ctx, tp(tenant, id), domain.ProgressInput{})
				if err != nil {
					fail(err)
				}
				transitioned <- err == nil
			}()
			go func() { // the waiter
				defer func() { <-sem; wg.Done() }()
				close(start)
				wa, err := h.Watch(ctx, tenant, id)
				if err != nil {
					fail(err)
					return
				}
				defer wa.Close()
				res, err := f.s.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: tenant}, ID: id})
				if err != nil {
					fail(err)
					return
				}
				if res.Request.Version == 2 {
					early.Add(1)
					return
				}
				t := time.NewTimer(10 * time.Second)
				defer t.Stop()
				var reread <-chan time.Time
				for {
					select {
					case <-reread: // as a long poll does (httpapi, wait.go)
						reread = nil
						wa.Refresh()
					case snap := <-wa.Changes():
						if snap.Err != nil { // a read that failed: read again soon
							rereads.Add(1)
							if reread == nil {
								reread = time.After(50 * time.Millisecond)
							}
							continue
						}
						if snap.Request.Version == 2 {
							return
						}
					case <-t.C:
						// Missed only if the change happened: a transition that
						// failed (a busy machine past the op timeout) has nothing to
						// wake anyone with, and is counted as a failed call.
						if <-transitioned {
							missed.Add(1)
						}
						return
					}
				}
			}()
		}
		wg.Wait()
		// Failed calls are the machine's (deadlines missed under load, counted and
		// shown); a missed wake-up is ours, and there must be none.
		if missed.Load() != 0 || failed.Load()*20 > int64(trials) {
			t.Fatalf("%d trials: %d missed wake-ups, %d failed calls (first: %v)", trials, missed.Load(), failed.Load(), firstErr.Load())
		}
		if failed.Load() != 0 || rereads.Load() != 0 {
			t.Logf("%d calls failed (first: %v); %d waiters' reads failed and were made again", failed.Load(), firstErr.Load(), rereads.Load())
		}
		t.Logf("%d trials: %d saw the change in their first read, %d were woken, 0 missed", trials, early.Load(), int64(trials)-early.Load())
	})
}

// TestHubResubscribesAfterLoss drops the hub's subscription connection and
// changes the request at once, so that its announcement is most likely lost
// with the connection: the waiter still learns of the change, because the hub
// reads every watched id again once resubscribed. A Redis restarted empty
// ends the watch with NOT_FOUND the same way.
func TestHubResubscribesAfterLoss(t *testing.T) {
	p := testenv.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	f := newFixture(t, backend{testenv.Backend{Name: "own", Client: func(testing.TB) redis.UniversalClient { return rdb }}, 1}, nil)
	h := newHub(t, f.s)
	admin := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer admin.Close()
	for round := 0; round < 5; round++ {
		r := f.mustCreate(t, "acme", "export")
		wa, err := h.Watch(ctx, "acme", r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{}); err != nil {
			t.Fatal(err)
		}
		if snap := nextChange(t, wa, 1, 10*time.Second); snap.Err != nil || snap.Request.Version != 2 {
			t.Fatalf("round %d: %+v", round, snap)
		}
		wa.Close()
	}

	r := f.mustCreate(t, "acme", "export")
	wa, err := h.Watch(ctx, "acme", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	p.Restart() // no persistence: it comes back empty
	snap := nextChange(t, wa, 1, 20*time.Second)
	if domain.ErrorCode(snap.Err) != domain.NotFound {
		t.Fatalf("after a restart: %+v, want NOT_FOUND", snap)
	}
	// and new watches work again
	r = f.mustCreate(t, "acme", "export")
	wa2, err := h.Watch(ctx, "acme", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer wa2.Close()
	if _, err := f.s.Cancel(ctx, tp("acme", r.ID), domain.CancelInput{}); err != nil {
		t.Fatal(err)
	}
	if snap := nextChange(t, wa2, 1, 5*time.Second); snap.Err != nil || !snap.Request.Done {
		t.Fatalf("after the restart: %+v", snap)
	}
}

// TestHubWatchFailsWhileRedisIsAway: Watch answers BACKEND_UNAVAILABLE, for
// the caller to answer an ordinary poll, never hangs past the op timeout.
func TestHubWatchFailsWhileRedisIsAway(t *testing.T) {
	p := testenv.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	f := newFixture(t, backend{testenv.Backend{Name: "own", Client: func(testing.TB) redis.UniversalClient { return rdb }}, 1},
		func(o *store.Options) { o.OpTimeout = 300 * time.Millisecond })
	h := newHub(t, f.s)
	r := f.mustCreate(t, "acme", "export")
	p.Stop()
	start := time.Now()
	_, err := h.Watch(ctx, "acme", r.ID)
	wantCode(t, err, domain.BackendUnavailable)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Watch took %s with Redis away", d)
	}
}

// TestHubClusterMasterKilled holds watches on requests of every master of a
// private cluster, kills one master, and changes every request once the
// cluster has failed over: every watch learns of its change, the ones whose
// shard moved included (the hub resubscribes on the promoted replica).
func TestHubClusterMasterKilled(t *testing.T) {
	c := testenv.StartCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: 500 * time.Millisecond,
		MinRetryBackoff: 8 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	f := newFixture(t, backend{testenv.Backend{Name: "cluster", Client: func(testing.TB) redis.UniversalClient { return rdb }, AutoPipeline: true}, 1}, nil)
	h := newHub(t, f.s)
	const tenants = 24 // spread over the three masters
	type held struct {
		tenant string
		r      *domain.Request
		wa     domain.Watch
	}
	var all []held
	masters := map[string]bool{}
	for i := 0; i < tenants; i++ {
		tenant := fmt.Sprintf("t%d", i)
		r := f.mustCreate(t, tenant, "export")
		wa, err := h.Watch(ctx, tenant, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer wa.Close()
		all = append(all, held{tenant, r, wa})
		masters[c.MasterOf("{"+tenant+"}")] = true
	}
	if len(masters) != 3 || h.Subscriptions() != 3 {
		t.Fatalf("watches on %d masters over %d subscription connections, want 3 and 3", len(masters), h.Subscriptions())
	}
	victim := c.MasterOf("{t0}")
	c.Node(victim).Stop()
	deadline := time.Now().Add(30 * time.Second)
	for _, x := range all { // retried while the cluster fails over
		for {
			_, err := f.s.MarkProcessing(ctx, tp(x.tenant, x.r.ID), domain.ProgressInput{})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("transition %s: %v", x.tenant, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, x := range all {
		snap := nextChange(t, x.wa, 1, 15*time.Second)
		if snap.Err != nil || snap.Request.Version != 2 {
			t.Fatalf("%s: %+v", x.tenant, snap)
		}
	}
	if got := c.MasterOf("{t0}"); got == victim || got == "" {
		t.Fatalf("no failover: {t0} on %q", got)
	}
}

// TestWaitForChange is the hub's one-call API for live pages.
func TestWaitForChange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		h := newHub(t, f.s)
		r := f.mustCreate(t, "acme", "export")
		go func() {
			time.Sleep(50 * time.Millisecond)
			_, _ = f.replica(t).Fail(ctx, tp("acme", r.ID), domain.FailInput{Failure: domain.FailureJSON("ERR_X", "x")})
		}()
		got, err := h.WaitForChange(ctx, "acme", r.ID, r.Version)
		if err != nil || got.Status != domain.StatusFailed {
			t.Fatalf("%+v %v", got, err)
		}
		// at a version that is not current, it answers at once
		if got, err := h.WaitForChange(ctx, "acme", r.ID, 1); err != nil || got.Version != 2 {
			t.Fatalf("%+v %v", got, err)
		}
		// its context's end answers the state then
		r2 := f.mustCreate(t, "acme", "export")
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if got, err := h.WaitForChange(cctx, "acme", r2.ID, 1); err != nil || got.Version != 1 {
			t.Fatalf("%+v %v", got, err)
		}
		_, err = h.WaitForChange(ctx, "acme", strings.Repeat("x", 36), 1)
		wantCode(t, err, domain.NotFound)
	})
}
