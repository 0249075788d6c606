package store_test

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// TestTenantSummary: the counts by status follow transitions across types, the
// oldest queued and processing times are those of the oldest such requests,
// and the frozen flag shows; on every backend (one slot per tenant).
func TestTenantSummary(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		if s, err := f.s.TenantSummary(ctx, "empty"); err != nil || s.Total() != 0 || s.OldestQueued != nil {
			t.Fatalf("empty tenant: %+v %v", s, err)
		}
		first := f.mustCreate(t, "acme", "a")
		f.clock.Add(time.Second)
		second := f.mustCreate(t, "acme", "b")
		f.clock.Add(time.Second)
		third := f.mustCreate(t, "acme", "b")
		if _, err := f.s.MarkProcessing(ctx, tp("acme", first.ID), domain.ProgressInput{}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.Cancel(ctx, tp("acme", third.ID), domain.CancelInput{}); err != nil {
			t.Fatal(err)
		}
		f.mustCreate(t, "globex", "a")
		if err := f.s.SetFrozen(ctx, "acme", true); err != nil {
			t.Fatal(err)
		}
		s, err := f.s.TenantSummary(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		want := map[domain.Status]int64{domain.StatusQueued: 1, domain.StatusProcessing: 1, domain.StatusCancelled: 1}
		for _, st := range domain.Statuses {
			if s.Counts[st] != want[st] {
				t.Errorf("%s: %d, want %d", st, s.Counts[st], want[st])
			}
		}
		if !s.Frozen || s.OldestQueued == nil || !s.OldestQueued.Equal(second.CreatedAt.Time) ||
			s.OldestProcessing == nil || !s.OldestProcessing.Equal(first.CreatedAt.Time) {
			t.Fatalf("summary %+v (queued %v, processing %v)", s, s.OldestQueued, s.OldestProcessing)
		}
		// a type new since the last summary is counted too (types seen before
		// are asked in the meta hash's round trip)
		if err := f.s.SetFrozen(ctx, "acme", false); err != nil {
			t.Fatal(err)
		}
		f.mustCreate(t, "acme", "c")
		if s, err := f.s.TenantSummary(ctx, "acme"); err != nil || s.Counts[domain.StatusQueued] != 2 || s.Total() != 4 {
			t.Fatalf("after a new type: %+v %v", s.Counts, err)
		}
		if s, err := f.s.TenantSummary(ctx, "acme"); err != nil || s.Counts[domain.StatusQueued] != 2 || s.Total() != 4 {
			t.Fatalf("again: %+v %v", s.Counts, err)
		}
		tenants, err := f.s.Tenants(ctx)
		if err != nil || len(tenants) != 2 {
			t.Fatalf("tenants %v %v", tenants, err)
		}
	})
}

// TestConsoleSessions: a session reads back until it expires (by its own
// expiry, whether or not the TTL fired) or is deleted; a sign-in token is
// taken once; operator keys are saved, listed, found and revoked.
func TestConsoleSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		sess := domain.ConsoleSession{KeyID: "key_x", Tenant: "acme", Expires: f.clock.Now().Add(time.Hour)}
		if err := f.s.SaveConsoleSession(ctx, "d1", sess); err != nil {
			t.Fatal(err)
		}
		got, err := f.s.ConsoleSession(ctx, "d1")
		if err != nil || got.KeyID != "key_x" || got.Tenant != "acme" || got.Operator {
			t.Fatalf("session: %+v %v", got, err)
		}
		_, err = f.s.ConsoleSession(ctx, "d2")
		wantCode(t, err, domain.NotFound)
		f.clock.Add(time.Hour)
		_, err = f.s.ConsoleSession(ctx, "d1")
		wantCode(t, err, domain.NotFound)
		sess.Expires, sess.Operator = f.clock.Now().Add(time.Hour), true
		if err := f.s.SaveConsoleSession(ctx, "d3", sess); err != nil {
			t.Fatal(err)
		}
		if got, _ := f.s.ConsoleSession(ctx, "d3"); !got.Operator {
			t.Fatalf("operator flag lost: %+v", got)
		}
		if err := f.s.DeleteConsoleSession(ctx, "d3"); err != nil {
			t.Fatal(err)
		}
		_, err = f.s.ConsoleSession(ctx, "d3")
		wantCode(t, err, domain.NotFound)

		if err := f.s.SaveSignInToken(ctx, "t1", "key_y", time.Minute); err != nil {
			t.Fatal(err)
		}
		if id, err := f.s.TakeSignInToken(ctx, "t1"); err != nil || id != "key_y" {
			t.Fatalf("take: %q %v", id, err)
		}
		_, err = f.s.TakeSignInToken(ctx, "t1")
		wantCode(t, err, domain.NotFound)

		_, op, _ := auth.NewOperatorKey("ops", f.clock.Now())
		if err := f.s.SaveKey(ctx, op); err != nil {
			t.Fatal(err)
		}
		if k, err := f.s.LookupKey(ctx, op.ID); err != nil || !k.Operator || k.Tenant != "" || k.Name != "ops" {
			t.Fatalf("lookup operator key: %+v %v", k, err)
		}
		if ks, err := f.s.ListOperatorKeys(ctx); err != nil || len(ks) != 1 || ks[0].ID != op.ID {
			t.Fatalf("list operator keys: %+v %v", ks, err)
		}
		if err := f.s.RevokeKey(ctx, op.ID); err != nil {
			t.Fatal(err)
		}
		if ks, _ := f.s.ListOperatorKeys(ctx); len(ks) != 0 {
			t.Fatalf("revoked operator key still listed: %+v", ks)
		}
		_, err = f.s.LookupKey(ctx, op.ID)
		wantCode(t, err, domain.NotFound)
	})
}

// TestReadTenantPage: the requests page's read answers what List,
// TenantSummary and ConsoleSession answer one by one (a page and the next, an
// empty page, a bad cursor, a frozen tenant, an unknown session, none asked);
// and with an autopipeliner a page with records costs no exchange with Redis
// more than List alone (the summary and the session ride its pipeline).
func TestReadTenantPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		for range 7 {
			f.mustCreate(t, "acme", "a")
			f.clock.Add(time.Millisecond)
		}
		b2 := f.mustCreate(t, "acme", "b")
		if _, err := f.s.MarkProcessing(ctx, tp("acme", b2.ID), domain.ProgressInput{}); err != nil {
			t.Fatal(err)
		}
		f.mustCreate(t, "globex", "a")
		sess := domain.ConsoleSession{KeyID: "key_x", Tenant: "acme", Expires: f.clock.Now().Add(time.Hour)}
		if err := f.s.SaveConsoleSession(ctx, "d1", sess); err != nil {
			t.Fatal(err)
		}
		// the store learns the tenant's types (its first summary asks their
		// indexes in a round trip of their own)
		if _, err := f.s.TenantSummary(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		var exchanges atomic.Int64
		f.rdb.AddHook(countingHook{&exchanges})

		check := func(what string, filter domain.ListFilter, digest string) domain.TenantPage {
			t.Helper()
			filter.Tenant = "acme"
			before := exchanges.Load()
			got, err := f.s.ReadTenantPage(ctx, filter, digest)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			mid := exchanges.Load()
			page, listErr := f.s.List(ctx, filter)
			listed := exchanges.Load() - mid
			if b.AutoPipeline && listErr == nil && len(page.Items) > 0 && mid-before != listed {
				t.Errorf("%s: %d exchanges with Redis, List alone %d", what, mid-before, listed)
			}
			if domain.ErrorCode(got.ListErr) != domain.ErrorCode(listErr) || (listErr == nil) != (got.Page != nil) {
				t.Fatalf("%s: list error %v, want %v", what, got.ListErr, listErr)
			}
			if page != nil && (!reflect.DeepEqual(ids(got.Page.Items), ids(page.Items)) || got.Page.NextCursor != page.NextCursor) {
				t.Fatalf("%s: page %v %q, want %v %q", what, ids(got.Page.Items), got.Page.NextCursor, ids(page.Items), page.NextCursor)
			}
			sum, err := f.s.TenantSummary(ctx, "acme")
			if err != nil || !reflect.DeepEqual(got.Summary, sum) {
				t.Fatalf("%s: summary %+v, want %+v (%v)", what, got.Summary, sum, err)
			}
			var wantSess domain.ConsoleSession
			var wantErr error
			if digest != "" {
				wantSess, wantErr = f.s.ConsoleSession(ctx, digest)
			}
			if got.Session != wantSess || domain.ErrorCode(got.SessionErr) != domain.ErrorCode(wantErr) || (wantErr == nil) != (got.SessionErr == nil) {
				t.Fatalf("%s: session %+v %v, want %+v %v", what, got.Session, got.SessionErr, wantSess, wantErr)
			}
			return got
		}
		first := check("first page", domain.ListFilter{Limit: 5}, "d1")
		if len(first.Page.Items) != 5 || first.Page.NextCursor == "" || first.Session.KeyID != "key_x" ||
			first.Summary.Counts[domain.StatusQueued] != 7 || first.Summary.OldestProcessing == nil {
			t.Fatalf("first page: %d items, cursor %q, %+v", len(first.Page.Items), first.Page.NextCursor, first)
		}
		check("next page", domain.ListFilter{Limit: 5, Cursor: first.Page.NextCursor}, "d1")
		if p := check("empty page", domain.ListFilter{Type: "none"}, "unknown"); domain.ErrorCode(p.SessionErr) != domain.NotFound {
			t.Fatalf("unknown session: %v", p.SessionErr)
		}
		if p := check("bad cursor", domain.ListFilter{Cursor: "garbage"}, ""); domain.ErrorCode(p.ListErr) != domain.InvalidCursor {
			t.Fatalf("bad cursor: %v", p.ListErr)
		}
		if err := f.s.SetFrozen(ctx, "acme", true); err != nil {
			t.Fatal(err)
		}
		if p := check("frozen", domain.ListFilter{}, "d1"); domain.ErrorCode(p.ListErr) != domain.TenantFrozen || !p.Summary.Frozen {
			t.Fatalf("frozen: %v %+v", p.ListErr, p.Summary)
		}
	})
}

func ids(rs []*domain.Request) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// countingHook counts the exchanges with Redis: each command or pipeline sent.
type countingHook struct{ n *atomic.Int64 }

func (h countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}

func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}
