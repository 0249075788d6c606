package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// rates is a RateLimits with the given per-credential write and admin limits a
// minute, and room enough for everything else.
func rates(write, admin int64) *ratelimit.Rates {
	return &ratelimit.Rates{Read: ratelimit.Rate{Limit: 1000, Period: time.Minute},
		Write: ratelimit.Rate{Limit: write, Period: time.Minute}, Admin: ratelimit.Rate{Limit: admin, Period: time.Minute},
		Tenant: ratelimit.Rate{Limit: 1000, Period: time.Minute}}
}

// trail is what a refused call must leave as it was: the requests indexed as
// queued and as processing, the audit stream and the webhook outbox.
func (f *fixture) trail(tb testing.TB, tenant string) [4]int64 {
	tb.Helper()
	return [4]int64{f.rdb.ZCard(ctx, f.prefix+":{"+tenant+"}:ix:q:x").Val(), f.rdb.ZCard(ctx, f.prefix+":{"+tenant+"}:ix:p:x").Val(),
		f.rdb.XLen(ctx, f.prefix+":{"+tenant+"}:au").Val(), f.rdb.XLen(ctx, f.prefix+":{"+tenant+"}:ob").Val()}
}

// TestWriteRateLimits: creates and transitions count against the write limits
// and deletes against the admin limits inside their own scripts, on the
// limiter's counters; a refused call writes nothing (no record, index entry,
// audit entry, outbox entry or idempotency entry) and says when to retry; the
// sweeper's timeouts are nobody's calls and are never refused.
func TestWriteRateLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// one shard's counters (shard 0's, {acme}): its requests are made
		// there (keyIn0), and each shard enforces ceil(limit / S) (docs/pacing.md)
		f := newFixture(t, b, func(o *store.Options) {
			o.RateLimits = rates(int64(3*b.Shards), int64(b.Shards))
			o.AuditBacklog = 1000
		})
		f.mustSaveWebhook(t, "acme", "ep_all", domain.WebhookEvents[:]...)
		if !f.s.CountsRateLimits("write") || !f.s.CountsRateLimits("admin") || !f.s.CountsRateLimits("read") {
			t.Fatal("the store says it does not count")
		}
		create := func(ik domain.IdempotencyKey) (*domain.Request, *domain.RateInfo, error) {
			var rate domain.RateInfo
			r, _, err := f.s.Create(ctx, domain.CreateParams{
				Call:    domain.Call{Tenant: "acme", By: "key_a", Credential: "key_a", Rate: &rate},
				IdemKey: ik,
				Input:   domain.CreateInput{Type: "x", Context: json.RawMessage(`{"a":1}`)},
			})
			return r, &rate, err
		}
		counted := func(id string) (domain.TransitionParams, *domain.RateInfo) {
			var rate domain.RateInfo
			return domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_a", Credential: "key_a", Rate: &rate}, ID: id}, &rate
		}

		r1, rate, err := create(f.keyIn0(""))
		if err != nil || rate.Limit != 3 || rate.Remaining != 2 || !rate.Reset.After(time.Now()) {
			t.Fatalf("first create: %+v %v", rate, err)
		}
		p, rate := counted(r1.ID)
		if _, err := f.s.MarkProcessing(ctx, p, domain.ProgressInput{}); err != nil || rate.Remaining != 1 {
			t.Fatalf("processing: %+v %v", rate, err)
		}
		r2, rate, err := create(f.keyIn0(""))
		if err != nil || rate.Remaining != 0 {
			t.Fatalf("third write: %+v %v", rate, err)
		}

		before := f.trail(t, "acme")
		ik1 := f.keyIn0("ik-1")
		_, rate, err = create(ik1)
		wantCode(t, err, domain.RateLimited)
		var de *domain.Error
		// a create's window is timed by its id (the wall clock), its
		// Retry-After from the store's clock (the test's fake one, behind the
		// wall clock by however long the test has run so far)
		behind := int(time.Since(f.clock.Now())/time.Second) + 1
		if !asDomain(err, &de) || de.RetryAfterSeconds < 1 || de.RetryAfterSeconds > 60+behind || rate.Limit != 3 || rate.Remaining != 0 {
			t.Fatalf("refused create (store clock %ds behind): %+v %+v", behind, rate, de)
		}
		p, _ = counted(r2.ID)
		_, err = f.s.MarkProcessing(ctx, p, domain.ProgressInput{})
		wantCode(t, err, domain.RateLimited)
		if after := f.trail(t, "acme"); after != before {
			t.Fatalf("refused calls changed the trail: %v, then %v", before, after)
		}
		if got := f.mustGet(t, "acme", r2.ID); got.Status != domain.StatusQueued || got.Version != 1 {
			t.Fatalf("refused transition changed the request: %+v", got)
		}
		// the refused create did not claim its Idempotency-Key: a store that does
		// not count makes a new request with it, not a replay
		free, err := store.New(f.rdb, store.Options{Prefix: f.prefix, OpTimeout: 5 * time.Second, Now: f.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		if _, replay, err := free.Create(ctx, domain.CreateParams{
			Call:    domain.Call{Tenant: "acme", By: "key_a"},
			IdemKey: ik1,
			Input:   domain.CreateInput{Type: "x", Context: json.RawMessage(`{"a":1}`)},
		}); err != nil || replay {
			t.Fatalf("create with the refused call's key: replay=%v %v", replay, err)
		}

		// the sweeper's timeout is not counted, so not refused
		f.clock.Add(16 * time.Minute)
		if done, err := f.s.TimeOutProcessing(ctx, "acme", r1.ID); err != nil || !done {
			t.Fatalf("timeout with the write budget spent: %v %v", done, err)
		}

		// deletes: the admin budget (1)
		p, rate = counted(r2.ID)
		if err := f.s.Remove(ctx, p); err != nil || rate.Limit != 1 || rate.Remaining != 0 {
			t.Fatalf("delete: %+v %v", rate, err)
		}
		before = f.trail(t, "acme")
		p, rate = counted(r1.ID)
		wantCode(t, f.s.Remove(ctx, p), domain.RateLimited)
		if rate.Limit != 1 || rate.Remaining != 0 {
			t.Fatalf("refused delete: %+v", rate)
		}
		if after := f.trail(t, "acme"); after != before {
			t.Fatalf("refused delete changed the trail: %v, then %v", before, after)
		}
		f.mustGet(t, "acme", r1.ID)

		// the limiter's counters, spelled as today with one tag: the credential's
		// counts every call (5 writes, 2 deletes), the tenant's only the allowed ones
		for key, want := range map[string]string{
			f.prefix + ":{acme}:rl:write:key_a": "5", f.prefix + ":{acme}:rl:admin:key_a": "2", f.prefix + ":{acme}:rl:tenant": "4",
		} {
			if v := f.rdb.Get(ctx, key).Val(); v != want {
				t.Errorf("%s = %q, want %q", key, v, want)
			}
			if ttl := f.rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute {
				t.Errorf("%s TTL %v", key, ttl)
			}
		}
	})
}

// TestUncountedCalls: without a credential, or for a scope whose rate is not
// set, the scripts count nothing and say so (no rate in the answer).
func TestUncountedCalls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) {
			o.RateLimits = &ratelimit.Rates{Read: ratelimit.Rate{Limit: 5, Period: time.Minute},
				Tenant: ratelimit.Rate{Limit: 5, Period: time.Minute}}
		})
		if f.s.CountsRateLimits("write") || f.s.CountsRateLimits("admin") || !f.s.CountsRateLimits("read") {
			t.Fatal("CountsRateLimits disagrees with the rates")
		}
		rate := &domain.RateInfo{}
		for range 10 { // twice the tenant's budget: nothing was counted
			if _, _, err := f.s.Create(ctx, domain.CreateParams{
				Call:  domain.Call{Tenant: "acme", By: "key_a", Credential: "key_a", Rate: rate},
				Input: domain.CreateInput{Type: "x"},
			}); err != nil {
				t.Fatal(err)
			}
		}
		if *rate != (domain.RateInfo{}) {
			t.Fatalf("uncounted create reported %+v", rate)
		}
		for _, tag := range store.TenantTags(f.s, "acme") {
			if n := f.rdb.Exists(ctx, f.prefix+":"+tag+":rl:tenant", f.prefix+":"+tag+":rl:write:key_a").Val(); n != 0 {
				t.Fatalf("%d counters written in %s", n, tag)
			}
		}
	})
}

// TestAdminAndListingRateLimits: webhook management counts against the admin
// limits inside its own round trip (register and delete in their scripts,
// the reads in the pipeline of the read), listings against the read limits in
// their first shard's script call; a refused call changes nothing and reads
// nothing it answers, and says how long to wait.
func TestAdminAndListingRateLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// the tenant-level calls count on shard 0's counters ({acme}), each
		// shard enforcing ceil(limit / S)
		f := newFixture(t, b, func(o *store.Options) {
			o.RateLimits = rates(1000, int64(3*b.Shards))
			o.RateLimits.Read.Limit = int64(2 * b.Shards)
		})
		var rate domain.RateInfo
		call := domain.Call{Tenant: "acme", Credential: "key_a", Rate: &rate}
		w := domain.Webhook{ID: "ep_a", URL: "https://partner.example/a", Events: domain.DefaultWebhookEvents,
			CreatedAt: domain.TimeMs(f.clock.Now().UnixMilli()), SealedSecret: "v1.sealed-a"}
		refused := func(what string, err error) {
			t.Helper()
			wantCode(t, err, domain.RateLimited)
			var de *domain.Error
			if !asDomain(err, &de) || de.RetryAfterSeconds < 1 || de.RetryAfterSeconds > 60 || rate.Remaining != 0 || rate.Limit == 0 {
				t.Fatalf("refused %s: %+v %+v", what, rate, de)
			}
		}

		if err := f.s.SaveWebhook(ctx, call, w, 20); err != nil || rate.Limit != 3 || rate.Remaining != 2 || !rate.Reset.After(f.clock.Now()) {
			t.Fatalf("register: %+v %v", rate, err)
		}
		rate = domain.RateInfo{}
		if ws, err := f.s.Webhooks(ctx, call); err != nil || len(ws) != 1 || rate.Remaining != 1 {
			t.Fatalf("list webhooks: %d %+v %v", len(ws), rate, err)
		}
		rate = domain.RateInfo{}
		trips := &testenv.RoundTrips{}
		f.rdb.AddHook(trips)
		if got, err := f.s.Webhook(ctx, call, "ep_a"); err != nil || got.URL != w.URL || rate.Remaining != 0 {
			t.Fatalf("read webhook: %+v %+v %v", got, rate, err)
		}
		if n := trips.Trips.Load(); n != 1 { // counted in the read's own pipeline
			t.Fatalf("a counted webhook read took %d round trips, want 1", n)
		}
		_, err := f.s.Webhook(ctx, call, "ep_a")
		refused("read", err)
		_, err = f.s.Webhooks(ctx, call)
		refused("list", err)
		_, err = f.s.WebhookDeliveries(ctx, call, "ep_a")
		refused("deliveries", err)
		refused("delete", f.s.DeleteWebhook(ctx, call, "ep_a"))
		w2 := w
		w2.ID = "ep_b"
		refused("register", f.s.SaveWebhook(ctx, call, w2, 20))
		if ws, err := f.s.Webhooks(ctx, domain.Call{Tenant: "acme"}); err != nil || len(ws) != 1 || ws[0].ID != "ep_a" {
			t.Fatalf("refused calls changed the endpoints: %+v %v", ws, err)
		}

		// listings: the read budget (2), counted once per listing however
		// many shards it asks
		f.mustCreate(t, "acme", "x")
		list := func() (*domain.ListPage, error) {
			rate = domain.RateInfo{}
			return f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme", Credential: "key_a", Rate: &rate}})
		}
		for want := int64(1); want >= 0; want-- {
			if page, err := list(); err != nil || len(page.Items) != 1 || rate.Limit != 2 || rate.Remaining != want {
				t.Fatalf("listing: %+v %v", rate, err)
			}
		}
		page, err := list()
		refused("listing", err)
		if page != nil {
			t.Fatalf("a refused listing answered %+v", page)
		}

		for key, want := range map[string]string{
			f.prefix + ":{acme}:rl:admin:key_a": "8", f.prefix + ":{acme}:rl:read:key_a": "3", f.prefix + ":{acme}:rl:tenant": "5",
		} {
			if v := f.rdb.Get(ctx, key).Val(); v != want {
				t.Errorf("%s = %q, want %q", key, v, want)
			}
		}
	})
}
