package store_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
)

func (f *fixture) mustCreateLabelled(tb testing.TB, tenant, typ string, labels domain.Labels) *domain.Request {
	tb.Helper()
	r, _, err := f.s.Create(ctx, domain.CreateParams{
		Call:  domain.Call{Tenant: tenant, By: "key_a"},
		Input: domain.CreateInput{Type: typ, Context: json.RawMessage(`{"a":1}`), Labels: labels},
	})
	if err != nil {
		tb.Fatalf("create: %v", err)
	}
	return r
}

// walk lists every page of filter f with a small page size and answers the
// ids in order.
func (f *fixture) walk(tb testing.TB, tenant string, lf domain.ListFilter) []string {
	tb.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 100 {
			tb.Fatal("the cursor walk does not end")
		}
		p, err := f.s.List(ctx, inTenant(tenant, lf))
		if err != nil {
			tb.Fatalf("list %+v: %v", lf, err)
		}
		for _, r := range p.Items {
			ids = append(ids, r.ID)
		}
		if p.NextCursor == "" {
			return ids
		}
		lf.Cursor = p.NextCursor
	}
}

// TestListByLabels: label_selector is exact, combined with type, status and
// time and the cursor, newest first, on every backend and with tenant shards;
// a request is found as soon as its create is answered.
func TestListByLabels(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		type made struct {
			r      *domain.Request
			status domain.Status
		}
		var all []made
		envs := []string{"prod", "dev"}
		teams := []string{"a", "b", "c"}
		statuses := []domain.Status{domain.StatusQueued, domain.StatusProcessing, domain.StatusSucceeded, domain.StatusFailed}
		for i := range 36 {
			var ls []domain.Label
			if i%5 != 4 { // some requests have no labels
				ls = append(ls, domain.Label{Name: "env", Value: envs[i%2]}, domain.Label{Name: "team", Value: teams[i%3]})
			}
			if i%4 == 0 {
				ls = append(ls, domain.Label{Name: "tier", Value: "gold"})
			}
			typ := []string{"x", "y"}[(i/2)%2]
			r := f.mustCreateLabelled(t, "acme", typ, domain.MakeLabels(ls))
			// read-your-writes: found by its labels at once
			if len(ls) > 0 {
				p, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, LabelSelector: domain.MakeLabels(ls[:1]), Limit: 1})
				if err != nil || len(p.Items) != 1 || p.Items[0].ID != r.ID {
					t.Fatalf("request %d not found by %s right after its create: %+v %v", i, ls[0].Name, p, err)
				}
			}
			st := statuses[i%len(statuses)]
			f.moveTo(t, "acme", r.ID, st)
			all = append(all, made{r, st})
			f.clock.Add(time.Millisecond)
		}
		f.mustCreateLabelled(t, "globex", "x", "env=prod,team=a") // another tenant's never shows
		mid := all[18].r.CreatedAt.Time

		for _, c := range []domain.ListFilter{
			{LabelSelector: "env=prod"},
			{LabelSelector: "team=b"},
			{LabelSelector: "env=prod,team=a"},
			{LabelSelector: "env=dev,team=c,tier=gold"},
			{LabelSelector: "env=prod", Type: "y"},
			{LabelSelector: "team=a", Statuses: []domain.Status{domain.StatusFailed, domain.StatusQueued}},
			{LabelSelector: "env=dev", Type: "x", Statuses: []domain.Status{domain.StatusSucceeded}},
			{LabelSelector: "env=prod", CreatedAfter: &mid},
			{LabelSelector: "team=c", CreatedBefore: &mid},
			{LabelSelector: "env=nowhere"},
			{LabelSelector: "env=prod,team=nowhere"},
		} {
			var want []string
			for _, m := range all {
				match := (c.Type == "" || m.r.Type == c.Type) &&
					(len(c.Statuses) == 0 || slices.Contains(c.Statuses, m.status)) &&
					(c.CreatedAfter == nil || !m.r.CreatedAt.Before(*c.CreatedAfter)) &&
					(c.CreatedBefore == nil || !m.r.CreatedAt.After(*c.CreatedBefore))
				for _, l := range c.LabelSelector.Pairs() {
					if v, ok := m.r.Labels.Get(l.Name); !ok || v != l.Value {
						match = false
					}
				}
				if match {
					want = append(want, m.r.ID)
				}
			}
			sort.Sort(sort.Reverse(sort.StringSlice(want)))
			for _, limit := range []int{3, 50} {
				c.Limit = limit
				got := f.walk(t, "acme", c)
				if !slices.Equal(got, want) {
					t.Errorf("%+v limit %d:\n got %v\nwant %v", c, limit, got, want)
				}
			}
		}
		// a cursor is bound to its selector
		p, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, LabelSelector: "env=prod", Limit: 2})
		if err != nil || p.NextCursor == "" {
			t.Fatalf("%+v %v", p, err)
		}
		_, err = f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, LabelSelector: "env=dev", Limit: 2, Cursor: p.NextCursor})
		wantCode(t, err, domain.InvalidCursor)
		_, err = f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, Limit: 2, Cursor: p.NextCursor})
		wantCode(t, err, domain.InvalidCursor)
	})
}

// labelEntries counts the entries of tenant's label indexes, every status and
// shard, of the given terms.
func (f *fixture) labelEntries(tb testing.TB, tenant string, terms ...string) int64 {
	tb.Helper()
	var n int64
	for _, tag := range store.TenantTags(f.s, tenant) {
		for _, st := range []string{"q", "p", "s", "f", "c", "e"} {
			for _, term := range terms {
				n += f.rdb.ZCard(ctx, f.prefix+":"+tag+":ix:l:"+st+":"+term).Val()
			}
		}
	}
	return n
}

// TestLabelIndexesFollowTheRecord: a transition moves the label entries with
// the request; delete, retention (the sweeper) and retention reapply remove
// them, so a label index never holds more than the live labelled requests.
func TestLabelIndexesFollowTheRecord(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const keep = 400 * time.Millisecond
		f := newFixture(t, b, func(o *store.Options) {
			o.Retention = keep
			o.RetentionByType = map[string]time.Duration{"y": time.Hour} // reapply shortens it, below
		})
		terms := []string{"env=prod", "team=a"}
		r := f.mustCreateLabelled(t, "acme", "x", "env=prod,team=a")
		key := func(st string, term string) string { return f.key("acme", r.ID, ":ix:l:"+st+":"+term) }
		if !zscore(t, f.rdb, key("q", "env=prod"), r.ID) || !zscore(t, f.rdb, key("q", "team=a"), r.ID) {
			t.Fatal("create wrote no queued label entries")
		}
		f.moveTo(t, "acme", r.ID, domain.StatusProcessing)
		if zscore(t, f.rdb, key("q", "env=prod"), r.ID) || !zscore(t, f.rdb, key("p", "env=prod"), r.ID) || f.labelEntries(t, "acme", terms...) != 2 {
			t.Fatal("processing did not move the label entries")
		}
		if _, err := f.s.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{}); err != nil || f.labelEntries(t, "acme", terms...) != 2 {
			t.Fatalf("a heartbeat changed the label entries: %v", err)
		}

		// delete
		d := f.mustCreateLabelled(t, "acme", "x", "env=prod,team=a")
		if n := f.labelEntries(t, "acme", terms...); n != 4 {
			t.Fatalf("%d entries", n)
		}
		if err := f.s.Delete(ctx, "acme", d.ID); err != nil {
			t.Fatal(err)
		}
		if n := f.labelEntries(t, "acme", terms...); n != 2 {
			t.Fatalf("delete left %d label entries, want 2", n)
		}

		// retention, by the sweeper
		f.catchUp()
		f.moveTo(t, "acme", r.ID, domain.StatusSucceeded)
		if !zscore(t, f.rdb, key("s", "team=a"), r.ID) || f.labelEntries(t, "acme", terms...) != 2 {
			t.Fatal("complete did not move the label entries")
		}
		time.Sleep(keep + 100*time.Millisecond)
		f.catchUp()
		if p, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, LabelSelector: "env=prod"}); err != nil || len(p.Items) != 0 {
			t.Fatalf("listing by label shows a record past retention: %+v %v", p, err)
		}
		if st := mustTick(t, f.sweeper(sweep.Options{})); st.Cleaned != 1 {
			t.Fatalf("sweep %+v", st)
		}
		if n := f.labelEntries(t, "acme", terms...); n != 0 {
			t.Fatalf("the sweeper left %d label entries", n)
		}

		// retention reapply: a shorter retention deletes the record and its entries
		g := f.mustCreateLabelled(t, "acme", "y", "env=prod,team=a")
		f.moveTo(t, "acme", g.ID, domain.StatusFailed)
		f.clock.Add(time.Minute)
		next, err := store.New(f.rdb, store.Options{Prefix: f.prefix, TenantShards: f.shards, OpTimeout: 5 * time.Second, Now: f.clock.Now,
			Retention: time.Hour, RetentionByType: map[string]time.Duration{"y": time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := next.ReapplyRetention(ctx, store.ReapplyOptions{Tenant: "acme"})
		if err != nil || p.Deleted != 1 {
			t.Fatalf("reapply: %+v %v", p, err)
		}
		if n := f.labelEntries(t, "acme", terms...); n != 0 {
			t.Fatalf("reapply left %d label entries", n)
		}
	})
}

// TestLabelledBucketEntrySpelling: a labelled request's retention bucket
// entry carries its labels after byte 31, so that the sweeper can name its
// label entries once the record is gone; an unlabelled one's is spelt as
// before labels (TestSweeperRetentionRemovesEveryKey sweeps those).
func TestLabelledBucketEntrySpelling(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreateLabelled(t, "acme", "x", "env=prod")
		f.moveTo(t, "acme", r.ID, domain.StatusCancelled)
		var entries []string
		for _, tag := range store.TenantTags(f.s, "acme") {
			for _, k := range f.rdb.ZRange(ctx, f.prefix+":"+tag+":rbi", 0, -1).Val() {
				entries = append(entries, f.rdb.LRange(ctx, f.prefix+":"+tag+":rb:"+k, 0, -1).Val()...)
			}
		}
		if want := fmt.Sprintf("c%sx\x1fenv=prod", r.ID); len(entries) != 1 || entries[0] != want {
			t.Fatalf("bucket entries %q, want %q", entries, want)
		}
	})
}
