package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

type clock = testenv.Clock

// backend is one kind of Redis the suite runs on (testenv.Backends), and the
// tenant shards (store.Options.TenantShards) the store spreads tenants over.
type backend struct {
	testenv.Backend
	Shards int
}

// suiteShards is the S > 1 the whole suite also runs with: more shards than
// the cluster has masters, so that a tenant spans every one.
const suiteShards = 4

// backends are testenv's, with one shard.
func backends() []backend {
	var out []backend
	for _, b := range testenv.Backends() {
		out = append(out, backend{b, 1})
	}
	return out
}

// fixture is a store over one backend with an isolated key prefix and a fake clock.
type fixture struct {
	s      *store.Store
	rdb    redis.UniversalClient
	clock  *clock
	prefix string
	shards int // Options.TenantShards
	keySeq int // mustCreateIn0's last key
}

func newFixture(tb testing.TB, b backend, mod func(*store.Options)) *fixture {
	tb.Helper()
	rdb := b.Client(tb)
	c := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	o := store.Options{Prefix: testenv.Isolate(tb), OpTimeout: 5 * time.Second, Retention: time.Hour,
		Now: c.Now, Schedule: []int{1, 2, 5}, EarlyTolerance: 0.2, RetentionBucket: 100 * time.Millisecond,
		AutoPipeline: b.AutoPipeline, TenantShards: b.Shards}
	if mod != nil {
		mod(&o)
	}
	s, err := store.New(rdb, o)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Ready(context.Background()); err != nil {
		tb.Fatalf("ready: %v", err)
	}
	return &fixture{s: s, rdb: rdb, clock: c, prefix: o.Prefix, shards: o.TenantShards}
}

// forEachBackend runs the suite's test f once per backend with one shard
// (subtest "<backend>") and once with suiteShards ("<backend>-S4").
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.Name, func(t *testing.T) { f(t, b) })
		b.Shards = suiteShards
		t.Run(fmt.Sprintf("%s-S%d", b.Name, b.Shards), func(t *testing.T) { f(t, b) })
	}
}

// key is the Redis key "<prefix>:<tag>:<rest>" where tag is the hash tag of
// the shard that holds request id of tenant.
func (f *fixture) key(tenant, id, rest string) string {
	return f.prefix + ":" + store.IDTag(f.s, tenant, id) + rest
}

var ctx = context.Background()

func (f *fixture) mustCreate(tb testing.TB, tenant, typ string) *domain.Request {
	tb.Helper()
	r, replay, err := f.s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: tenant, By: "key_a"}, Input: domain.CreateInput{Type: typ, Context: json.RawMessage(`{"a":1}`)}})
	if err != nil || replay {
		tb.Fatalf("create: %v replay=%v", err, replay)
	}
	return r
}

// mustCreateIn0 creates a request in shard 0 of tenant (mustCreateInShard).
// Tests of one shard's mechanics (batches, raw keys) use it.
func (f *fixture) mustCreateIn0(tb testing.TB, tenant, typ string) *domain.Request {
	tb.Helper()
	return f.mustCreateInShard(tb, tenant, typ, 0)
}

// mustCreateInShard creates a request of typ in shard sh of tenant: with an
// Idempotency-Key, found by trying, that chooses that shard (store.CreateShard).
func (f *fixture) mustCreateInShard(tb testing.TB, tenant, typ string, sh int) *domain.Request {
	tb.Helper()
	for {
		f.keySeq++
		key := fmt.Sprintf("shard%d-%d", sh, f.keySeq)
		if store.CreateShard(f.s, key) != sh {
			continue
		}
		r, replay, err := f.s.Create(ctx, domain.CreateParams{
			Call:    domain.Call{Tenant: tenant, By: "key_a"},
			IdemKey: domain.IdempotencyKey(key),
			Input:   domain.CreateInput{Type: typ, Context: json.RawMessage(`{"a":1}`)},
		})
		if err != nil || replay {
			tb.Fatalf("create: %v replay=%v", err, replay)
		}
		return r
	}
}

// keyIn0 is an Idempotency-Key, starting with base, whose create goes to
// shard 0 (store.CreateShard); base itself with one shard.
func (f *fixture) keyIn0(base string) domain.IdempotencyKey {
	if f.shards == 1 {
		return domain.IdempotencyKey(base)
	}
	for {
		f.keySeq++
		if k := fmt.Sprintf("%s-s0-%d", base, f.keySeq); store.CreateShard(f.s, k) == 0 {
			return domain.IdempotencyKey(k)
		}
	}
}

// sumCard is the ZCARD of the zset "<tag><rest>" summed over tenant's shards.
func (f *fixture) sumCard(tb testing.TB, tenant, rest string) int64 {
	tb.Helper()
	var n int64
	for _, tag := range store.TenantTags(f.s, tenant) {
		n += f.rdb.ZCard(ctx, f.prefix+":"+tag+rest).Val()
	}
	return n
}

func (f *fixture) mustGet(tb testing.TB, tenant, id string) *domain.Request {
	tb.Helper()
	r, _, err := pollOf(f.s, tenant, id, "")
	if err != nil {
		tb.Fatalf("get %s: %v", id, err)
	}
	return r
}

// inTenant is f listed by tenant.
func inTenant(tenant string, f domain.ListFilter) domain.ListFilter {
	f.Tenant = tenant
	return f
}

// pollOf polls as caller; the credential is the caller, as for an API key.
func pollOf(s *store.Store, tenant, id, caller string) (*domain.Request, int, error) {
	res, err := s.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: tenant, Credential: caller}, ID: id, Caller: caller})
	return res.Request, res.RetryAfter, err
}

func wantCode(tb testing.TB, err error, code domain.Code) {
	tb.Helper()
	if got := domain.ErrorCode(err); got != code {
		tb.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
}

func tp(tenant, id string) domain.TransitionParams {
	return domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: "key_w"}, ID: id}
}

func zscore(tb testing.TB, rdb redis.UniversalClient, key, member string) bool {
	tb.Helper()
	err := rdb.ZScore(ctx, key, member).Err()
	if err != nil && err != redis.Nil {
		tb.Fatal(err)
	}
	return err == nil
}

func TestLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreate(t, "acme", "statement.export")
		if r.Status != domain.StatusQueued || r.Version != 1 || r.Done {
			t.Fatalf("created %+v", r)
		}
		got := f.mustGet(t, "acme", r.ID)
		if got.Type != "statement.export" || string(got.Context) != `{"a":1}` || got.CreatedBy != "key_a" || !got.CreatedAt.Equal(r.CreatedAt.Time) {
			t.Fatalf("read back %+v", got)
		}
		if !zscore(t, f.rdb, f.key("acme", r.ID, ":ix:q:statement.export"), r.ID) {
			t.Fatal("create did not index the request")
		}
		// the queued index times the queued timeout: no deadline entry while queued
		if zscore(t, f.rdb, f.key("acme", r.ID, ":dl"), r.ID) {
			t.Fatal("create wrote a deadline entry")
		}

		f.clock.Add(time.Second)
		p, err := f.s.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{Progress: json.RawMessage(`{"percent":40}`)})
		if err != nil || p.Status != domain.StatusProcessing || p.Version != 2 || string(p.Progress) != `{"percent":40}` {
			t.Fatalf("processing: %+v %v", p, err)
		}
		if !zscore(t, f.rdb, f.key("acme", r.ID, ":dl"), r.ID) {
			t.Fatal("processing wrote no deadline entry")
		}
		f.clock.Add(time.Second)
		hb, err := f.s.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{})
		if err != nil || hb.Version != 3 || string(hb.Progress) != `{"percent":40}` || !hb.UpdatedAt.After(p.UpdatedAt.Time) {
			t.Fatalf("heartbeat: %+v %v", hb, err)
		}
		if zscore(t, f.rdb, f.key("acme", r.ID, ":ix:q:statement.export"), r.ID) || !zscore(t, f.rdb, f.key("acme", r.ID, ":ix:p:statement.export"), r.ID) {
			t.Fatal("processing did not move the index entry")
		}

		c, err := f.s.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"x":1}`)})
		if err != nil || c.Status != domain.StatusSucceeded || !c.Done || c.Version != 4 || c.CompletedAt == nil || c.ExpiresAt == nil {
			t.Fatalf("complete: %+v %v", c, err)
		}
		if want := c.CompletedAt.Add(time.Hour); !c.ExpiresAt.Equal(want) {
			t.Fatalf("expires_at %v, want %v", c.ExpiresAt, want)
		}
		if ttl := f.rdb.PTTL(ctx, f.key("acme", r.ID, ":r:"+r.ID)).Val(); ttl <= 0 || ttl > time.Hour+time.Minute {
			t.Fatalf("record TTL %v, want about an hour", ttl)
		}
		if zscore(t, f.rdb, f.key("acme", r.ID, ":ix:p:statement.export"), r.ID) || !zscore(t, f.rdb, f.key("acme", r.ID, ":ix:s:statement.export"), r.ID) || zscore(t, f.rdb, f.key("acme", r.ID, ":dl"), r.ID) {
			t.Fatal("complete did not move the index entries")
		}
		evs, err := f.s.Events(ctx, "acme", r.ID)
		if err != nil || len(evs) != 3 || evs[0].From != nil || evs[0].To != domain.StatusQueued ||
			*evs[1].From != domain.StatusQueued || evs[2].To != domain.StatusSucceeded || evs[2].By != "key_w" || evs[2].Seq != 3 {
			t.Fatalf("events %+v %v", evs, err)
		}
	})
}

func TestTerminalNeverChanges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		for _, end := range []string{"complete", "fail", "cancel"} {
			r := f.mustCreate(t, "acme", "x")
			var err error
			switch end {
			case "complete":
				_, err = f.s.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)})
			case "fail":
				_, err = f.s.Fail(ctx, tp("acme", r.ID), domain.FailInput{Failure: domain.FailureJSON("ERR_X", "boom")})
			case "cancel":
				_, err = f.s.Cancel(ctx, tp("acme", r.ID), domain.CancelInput{Reason: "user asked"})
			}
			if err != nil {
				t.Fatalf("%s: %v", end, err)
			}
			before := f.mustGet(t, "acme", r.ID)
			f.clock.Add(time.Second)
			_, e1 := f.s.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{})
			_, e2 := f.s.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"y":2}`)})
			_, e3 := f.s.Fail(ctx, tp("acme", r.ID), domain.FailInput{Failure: domain.FailureJSON("ERR_Y", "")})
			_, e4 := f.s.Cancel(ctx, tp("acme", r.ID), domain.CancelInput{})
			for _, err := range []error{e1, e2, e3, e4} {
				wantCode(t, err, domain.AlreadyTerminal)
				var de *domain.Error
				if ok := asDomain(err, &de); !ok || de.Request == nil || de.Request.Version != before.Version {
					t.Fatalf("409 without the current representation: %+v", de)
				}
			}
			after := f.mustGet(t, "acme", r.ID)
			if mustJSON(t, before) != mustJSON(t, after) {
				t.Fatalf("terminal record changed:\n%s\n%s", mustJSON(t, before), mustJSON(t, after))
			}
			if end == "cancel" && string(after.Cancellation) != `{"reason":"user asked"}` {
				t.Fatalf("cancellation %s", after.Cancellation)
			}
			if end == "fail" && string(after.Failure) != `{"code":"ERR_X","reason":"boom"}` {
				t.Fatalf("failure %s", after.Failure)
			}
		}
	})
}

func asDomain(err error, target **domain.Error) bool {
	e, ok := err.(*domain.Error)
	*target = e
	return ok
}

func mustJSON(tb testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestNotVisible(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreate(t, "acme", "x")
		for _, c := range []struct{ tenant, id string }{
			{"other", r.ID}, {"acme", "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a"}, {"acme", "not-a-uuid"},
			{"acme", strings.ToUpper(r.ID)}, {"acme", ""},
		} {
			_, _, err := pollOf(f.s, c.tenant, c.id, "")
			wantCode(t, err, domain.NotFound)
			_, err = f.s.Complete(ctx, tp(c.tenant, c.id), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)})
			wantCode(t, err, domain.NotFound)
			wantCode(t, f.s.Delete(ctx, c.tenant, c.id), domain.NotFound)
		}
		if got := f.mustGet(t, "acme", r.ID); got.Status != domain.StatusQueued || got.Version != 1 {
			t.Fatalf("foreign calls changed the record: %+v", got)
		}
	})
}

func TestIdempotentCreate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		p := domain.CreateParams{Call: domain.Call{Tenant: "acme", By: "key_a"}, IdemKey: "order-1", Input: domain.CreateInput{Type: "x"}}
		const n = 30
		ids := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, _, err := f.s.Create(ctx, p)
				errs[i] = err
				if err == nil {
					ids[i] = r.ID
				}
			}()
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil || ids[i] != ids[0] {
				t.Fatalf("racing creates with one key: %v, id %q vs %q", errs[i], ids[i], ids[0])
			}
		}
		n1, _ := f.rdb.ZCard(ctx, f.key("acme", ids[0], ":ix:q:x")).Result()
		if n1 != 1 {
			t.Fatalf("racing creates made %d requests", n1)
		}
		_, replay, err := f.s.Create(ctx, p)
		if err != nil || !replay {
			t.Fatalf("replay: %v %v", replay, err)
		}
		p2 := p
		p2.Input.Type = "y"
		_, _, err = f.s.Create(ctx, p2)
		wantCode(t, err, domain.IdempotencyKeyReused)
		other := p
		other.Tenant = "globex"
		r, replay, err := f.s.Create(ctx, other)
		if err != nil || replay || r.ID == ids[0] {
			t.Fatalf("another tenant's key must be independent: %v %v", replay, err)
		}
		// a deleted request frees its key for a new one
		if err := f.s.Delete(ctx, "acme", ids[0]); err != nil {
			t.Fatal(err)
		}
		r, replay, err = f.s.Create(ctx, p)
		if err != nil || replay || r.ID == ids[0] {
			t.Fatalf("create after delete: %v %v", replay, err)
		}
		// ... and the key now names the new request
		again, replay, err := f.s.Create(ctx, p)
		if err != nil || !replay || again.ID != r.ID {
			t.Fatalf("replay after the key was taken over: %+v %v %v, want %s", again, replay, err, r.ID)
		}
	})
}

func TestIdempotentTransition(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreate(t, "acme", "x")
		p := tp("acme", r.ID)
		p.IdemKey = "done-1"
		in := domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"v":1}`)}
		c1, err := f.s.Complete(ctx, p, in)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := f.s.Complete(ctx, p, in)
		if err != nil || c2.Version != c1.Version {
			t.Fatalf("replayed complete: %+v %v", c2, err)
		}
		_, err = f.s.Complete(ctx, p, domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"v":2}`)})
		wantCode(t, err, domain.IdempotencyKeyReused)
	})
}

func TestRacingCompletions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreate(t, "acme", "x")
		const n = 50
		type outcome struct {
			req *domain.Request
			err error
			op  int
		}
		out := make([]outcome, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				p := tp("acme", r.ID)
				p.By = fmt.Sprintf("key_%d", i)
				var res *domain.Request
				var err error
				switch i % 3 {
				case 0:
					res, err = f.s.Complete(ctx, p, domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(fmt.Sprintf(`{"w":%d}`, i))})
				case 1:
					res, err = f.s.Fail(ctx, p, domain.FailInput{Failure: domain.FailureJSON("ERR_X", fmt.Sprint(i))})
				default:
					res, err = f.s.Cancel(ctx, p, domain.CancelInput{Reason: fmt.Sprint(i)})
				}
				out[i] = outcome{res, err, i}
			}()
		}
		close(start)
		wg.Wait()
		var winner *domain.Request
		for _, o := range out {
			switch {
			case o.err == nil:
				if winner != nil {
					t.Fatalf("two winners: %+v and %+v", winner, o.req)
				}
				winner = o.req
			default:
				wantCode(t, o.err, domain.AlreadyTerminal)
			}
		}
		if winner == nil {
			t.Fatal("no winner")
		}
		stored := f.mustGet(t, "acme", r.ID)
		if mustJSON(t, stored) != mustJSON(t, winner) {
			t.Fatalf("stored record is not the winner's:\n%s\n%s", mustJSON(t, stored), mustJSON(t, winner))
		}
		if len(stored.Events) != 2 {
			t.Fatalf("events %+v", stored.Events)
		}
	})
}

func TestFrozenTenant(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreate(t, "acme", "x")
		if err := f.s.SetFrozen(ctx, "acme", true); err != nil {
			t.Fatal(err)
		}
		_, _, err := pollOf(f.s, "acme", r.ID, "key_r")
		wantCode(t, err, domain.TenantFrozen)
		_, _, err = f.s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "acme"}, Input: domain.CreateInput{Type: "x"}})
		wantCode(t, err, domain.TenantFrozen)
		_, err = f.s.Events(ctx, "acme", r.ID)
		wantCode(t, err, domain.TenantFrozen)
		if _, err := f.s.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatalf("transitions of a frozen tenant must be accepted: %v", err)
		}
		if _, _, err := pollOf(f.s, "globex", r.ID, ""); domain.ErrorCode(err) != domain.NotFound {
			t.Fatalf("other tenants unaffected: %v", err)
		}
		if err := f.s.SetFrozen(ctx, "acme", false); err != nil {
			t.Fatal(err)
		}
		if got := f.mustGet(t, "acme", r.ID); got.Status != domain.StatusSucceeded {
			t.Fatalf("after unfreeze: %+v", got)
		}
	})
}

func TestDeleteRemovesEverything(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreate(t, "acme", "x")
		if _, err := f.s.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := f.s.Delete(ctx, "acme", r.ID); err != nil {
			t.Fatal(err)
		}
		_, _, err := pollOf(f.s, "acme", r.ID, "")
		wantCode(t, err, domain.NotFound)
		wantCode(t, f.s.Delete(ctx, "acme", r.ID), domain.NotFound)
		for _, k := range []string{":ix:q:x", ":ix:s:x", ":dl"} {
			if zscore(t, f.rdb, f.key("acme", r.ID, k), r.ID) {
				t.Fatalf("%s still holds the deleted request", k)
			}
		}
		// the retention bucket may still name it: the sweeper skips vanished records
		for _, k := range []string{":r:", ":pc:"} {
			if n := f.rdb.Exists(ctx, f.key("acme", r.ID, k+r.ID)).Val(); n != 0 {
				t.Fatalf("%s%s survived the delete", k, r.ID)
			}
		}
	})
}

func TestPacing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreate(t, "acme", "x")
		poll := func(caller string) (int, error) {
			_, ra, err := pollOf(f.s, "acme", r.ID, caller)
			return ra, err
		}
		if ra, err := poll("key_a"); err != nil || ra != 1 {
			t.Fatalf("first poll: %d %v", ra, err)
		}
		f.clock.Add(500 * time.Millisecond)
		_, err := poll("key_a")
		wantCode(t, err, domain.PolledTooEarly)
		if ra, err := poll("key_b"); err != nil || ra != 1 {
			t.Fatalf("another caller is independent: %d %v", ra, err)
		}
		f.clock.Add(300 * time.Millisecond) // 0.8 s: within the 20% tolerance
		for _, want := range []int{2, 5, 5} {
			ra, err := poll("key_a")
			if err != nil || ra != want {
				t.Fatalf("poll: %d %v, want %d", ra, err, want)
			}
			f.clock.Add(time.Duration(want) * time.Second)
		}
		f.clock.Add(-4 * time.Second) // 1 s after being told 5 s
		_, err = poll("key_a")
		var de *domain.Error
		if !asDomain(err, &de) || de.Code != domain.PolledTooEarly || de.RetryAfterSeconds != 4 {
			t.Fatalf("early poll: %+v", err)
		}
		if _, err := f.s.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if ra, err := poll("key_a"); err != nil || ra != 0 {
				t.Fatalf("terminal requests are not paced: %d %v", ra, err)
			}
		}
		if n := f.rdb.Exists(ctx, f.key("acme", r.ID, ":pc:"+r.ID)).Val(); n != 0 {
			t.Fatal("pacing state survived the terminal transition")
		}
	})
}

func TestTimeouts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) {
			o.QueuedTimeout = time.Minute
			o.ProcessingTimeout = 10 * time.Second
			o.ProcessingTimeoutByType = map[string]time.Duration{"slow": time.Minute}
		})
		q := f.mustCreate(t, "acme", "x")
		p := f.mustCreate(t, "acme", "x")
		slow := f.mustCreate(t, "acme", "slow")
		for _, id := range []string{p.ID, slow.ID} {
			if _, err := f.s.MarkProcessing(ctx, tp("acme", id), domain.ProgressInput{}); err != nil {
				t.Fatal(err)
			}
		}
		if done, err := f.s.ExpireQueued(ctx, "acme", q.ID); err != nil || done {
			t.Fatalf("expired before its deadline: %v %v", done, err)
		}
		if done, err := f.s.ExpireQueued(ctx, "acme", p.ID); err != nil || done {
			t.Fatalf("expired a processing request: %v %v", done, err)
		}
		f.clock.Add(11 * time.Second)
		if done, err := f.s.TimeOutProcessing(ctx, "acme", slow.ID); err != nil || done {
			t.Fatalf("per-type processing timeout ignored: %v %v", done, err)
		}
		if done, err := f.s.TimeOutProcessing(ctx, "acme", p.ID); err != nil || !done {
			t.Fatalf("processing timeout: %v %v", done, err)
		}
		got := f.mustGet(t, "acme", p.ID)
		if got.Status != domain.StatusFailed || !strings.Contains(string(got.Failure), "ERR_JOB_EXECUTION_TIMED_OUT") || got.Events[len(got.Events)-1].By != "system" {
			t.Fatalf("timed out: %+v", got)
		}
		f.clock.Add(time.Minute)
		if done, err := f.s.ExpireQueued(ctx, "acme", q.ID); err != nil || !done {
			t.Fatalf("queued timeout: %v %v", done, err)
		}
		got = f.mustGet(t, "acme", q.ID)
		if got.Status != domain.StatusExpired || !strings.Contains(string(got.Failure), "REQUEST_EXPIRED") {
			t.Fatalf("expired: %+v", got)
		}
		if done, _ := f.s.ExpireQueued(ctx, "acme", q.ID); done {
			t.Fatal("a second sweeper must find nothing to do")
		}
	})
}

func TestRetentionForever(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) {
			o.Retention = 0
			o.RetentionByType = map[string]time.Duration{"short": time.Minute}
		})
		keep := f.mustCreate(t, "acme", "x")
		short := f.mustCreate(t, "acme", "short")
		for _, id := range []string{keep.ID, short.ID} {
			if _, err := f.s.Cancel(ctx, tp("acme", id), domain.CancelInput{}); err != nil {
				t.Fatal(err)
			}
		}
		if got := f.mustGet(t, "acme", keep.ID); got.ExpiresAt != nil || f.rdb.PTTL(ctx, f.key("acme", keep.ID, ":r:"+keep.ID)).Val() != -1 {
			t.Fatalf("retention 0 must keep forever: %+v", got.ExpiresAt)
		}
		if got := f.mustGet(t, "acme", short.ID); got.ExpiresAt == nil {
			t.Fatal("per-type retention ignored")
		}
		f.clock.Add(time.Minute)
		_, _, err := pollOf(f.s, "acme", short.ID, "")
		wantCode(t, err, domain.NotFound) // past expires_at even if the TTL has not fired
	})
}

// TestPacingFollowsConfig: a type's own schedule and the early tolerance come
// from the configuration (docs/reference.md §5), which reaches poll.lua as constants.
func TestPacingFollowsConfig(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) {
			o.Schedule = []int{3}
			o.ScheduleByType = map[string][]int{"slow": {10, 60}}
			o.EarlyTolerance = 0.5
		})
		slow, other := f.mustCreate(t, "acme", "slow"), f.mustCreate(t, "acme", "x")
		if _, ra, err := pollOf(f.s, "acme", other.ID, "key_a"); err != nil || ra != 3 {
			t.Fatalf("default schedule: %d %v", ra, err)
		}
		for _, step := range []struct {
			wait time.Duration
			ra   int // 0: too early
		}{{0, 10}, {4 * time.Second, 0}, {time.Second, 60}, {29 * time.Second, 0}, {time.Second, 60}} {
			f.clock.Add(step.wait)
			_, ra, err := pollOf(f.s, "acme", slow.ID, "key_a")
			if step.ra == 0 {
				wantCode(t, err, domain.PolledTooEarly)
				continue
			}
			if err != nil || ra != step.ra {
				t.Fatalf("after %s: %d %v, want %d", step.wait, ra, err, step.ra)
			}
		}
	})
}

// TestPollRateLimit: the poll script counts the read limits on the limiter's own
// counters, credential first, the tenant only while the credential is allowed.
func TestPollRateLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// Each shard's counters enforce ceil(limit / S) (docs/pacing.md): with
		// limits S x 3 and S x 5, the request's shard allows 3 and 5.
		f := newFixture(t, b, func(o *store.Options) {
			o.RateLimits = &ratelimit.Rates{Read: ratelimit.Rate{Limit: int64(3 * b.Shards), Period: time.Minute},
				Tenant: ratelimit.Rate{Limit: int64(5 * b.Shards), Period: time.Minute}}
		})
		r := f.mustCreate(t, "acme", "x")
		// poll's rate is what the store wrote through Call.Rate: nil when nothing
		poll := func(cred string) (domain.PollResult, *domain.RateInfo, error) {
			var rate domain.RateInfo
			res, err := f.s.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: "acme", Credential: cred, Rate: &rate}, ID: r.ID})
			if rate == (domain.RateInfo{}) {
				return res, nil, err
			}
			return res, &rate, err
		}
		for i := range 3 {
			_, rate, err := poll("key_a")
			if err != nil || rate == nil || rate.Limit != 3 || rate.Remaining != int64(2-i) {
				t.Fatalf("poll %d: %+v %v", i, rate, err)
			}
		}
		res, rate, err := poll("key_a")
		wantCode(t, err, domain.RateLimited)
		if rate == nil || rate.Remaining != 0 || res.Request != nil {
			t.Fatalf("refused: %+v %+v", res, rate)
		}
		var de *domain.Error
		if !asDomain(err, &de) || de.RetryAfterSeconds < 1 || de.RetryAfterSeconds > 60 {
			t.Fatalf("Retry-After %+v", de)
		}
		// key_a's refused poll did not spend the tenant's budget (3 of 5 used)
		for i := range 2 {
			_, rate, err := poll("key_b")
			if err != nil || rate == nil || rate.Limit != 5 || rate.Remaining != int64(1-i) {
				t.Fatalf("key_b poll %d: %+v %v", i, rate, err)
			}
		}
		_, _, err = poll("key_b")
		wantCode(t, err, domain.RateLimited)
		// the counters are the limiter's: <prefix>:{tenant}:rl:<scope>:<credential>,
		// under the request's shard's tag ({tenant} for shard 0)
		if v := f.rdb.Get(ctx, f.key("acme", r.ID, ":rl:read:key_a")).Val(); v != "4" {
			t.Fatalf("credential counter %q", v)
		}
		if ttl := f.rdb.PTTL(ctx, f.key("acme", r.ID, ":rl:tenant")).Val(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("tenant counter TTL %v", ttl)
		}
		// without a credential nothing is counted
		if _, rate, err := poll(""); err != nil || rate != nil {
			t.Fatalf("uncounted read: %+v %v", rate, err)
		}
	})
}

// TestPollIsOneRoundTrip: on every backend, as serve configures the store there
// (autopipelined on a real Redis and a cluster), a paced poll is one command in
// one round trip, and so is an early one.
func TestPollIsOneRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreate(t, "acme", "x")
		c := &testenv.RoundTrips{}
		f.rdb.AddHook(c)
		for _, want := range []domain.Code{"", domain.PolledTooEarly} {
			trips, cmds := c.Trips.Load(), c.Cmds.Load()
			_, _, err := pollOf(f.s, "acme", r.ID, "key_a")
			if domain.ErrorCode(err) != want {
				t.Fatalf("poll: %v, want code %q", err, want)
			}
			if n, m := c.Trips.Load()-trips, c.Cmds.Load()-cmds; n != 1 || m != 1 {
				t.Fatalf("poll (%q): %d round trips, %d commands; want 1 and 1", want, n, m)
			}
		}
	})
}

// TestScriptCacheLost: after Redis loses its script cache (a restart, a failover,
// SCRIPT FLUSH), calls still answer, on every backend as serve configures it: the
// EVALSHA's NOSCRIPT falls back to EVAL.
func TestScriptCacheLost(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreate(t, "acme", "x")
		if err := f.rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if got := f.mustGet(t, "acme", r.ID); got.ID != r.ID {
			t.Fatalf("poll after SCRIPT FLUSH: %+v", got)
		}
		if err := f.rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		f.mustCreate(t, "acme", "x")
	})
}
