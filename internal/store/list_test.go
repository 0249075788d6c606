package store_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
)

// entry is what the tests expect of one request in a listing.
type entry struct {
	typ     string
	status  domain.Status
	created time.Time
}

// listFixture makes a store whose queued timeout is tiny and whose clock runs a
// minute ahead, so that ExpireQueued works on any queued request at once.
func listFixture(tb testing.TB, b backend, mod func(*store.Options)) *fixture {
	f := newFixture(tb, b, func(o *store.Options) {
		o.QueuedTimeout = time.Millisecond
		if mod != nil {
			mod(o)
		}
	})
	f.clock.Add(time.Minute)
	return f
}

// seed creates n requests of the given types, cycling through every status.
func (f *fixture) seed(tb testing.TB, tenant string, n int, types ...string) map[string]entry {
	tb.Helper()
	out := map[string]entry{}
	for i := range n {
		r := f.mustCreate(tb, tenant, types[i%len(types)])
		st := domain.Statuses[(i/len(types))%len(domain.Statuses)]
		f.moveTo(tb, tenant, r.ID, st)
		out[r.ID] = entry{typ: r.Type, status: st, created: r.CreatedAt.Time}
	}
	return out
}

// moveTo drives a queued request to status st.
func (f *fixture) moveTo(tb testing.TB, tenant, id string, st domain.Status) {
	tb.Helper()
	var err error
	switch st {
	case domain.StatusQueued:
	case domain.StatusProcessing:
		_, err = f.s.MarkProcessing(ctx, tp(tenant, id), domain.ProgressInput{})
	case domain.StatusSucceeded:
		_, err = f.s.Complete(ctx, tp(tenant, id), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)})
	case domain.StatusFailed:
		_, err = f.s.Fail(ctx, tp(tenant, id), domain.FailInput{Failure: domain.FailureJSON("ERR_X", "")})
	case domain.StatusCancelled:
		_, err = f.s.Cancel(ctx, tp(tenant, id), domain.CancelInput{})
	case domain.StatusExpired:
		var done bool
		done, err = f.s.ExpireQueued(ctx, tenant, id)
		if err == nil && !done {
			err = fmt.Errorf("not expired")
		}
	}
	if err != nil {
		tb.Fatalf("move %s to %s: %v", id, st, err)
	}
}

// expect lists the ids of m that pass keep, in listing order. UUIDv7 ids start
// with their creation millisecond, so descending id order is the listing order.
func expect(m map[string]entry, keep func(entry) bool) []string {
	var ids []string
	for id, e := range m {
		if keep == nil || keep(e) {
			ids = append(ids, id)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(ids)))
	return ids
}

// listAll pages through a listing and returns every id, failing on duplicates.
func (f *fixture) listAll(tb testing.TB, tenant string, flt domain.ListFilter) (ids []string, pages int) {
	tb.Helper()
	return f.listPages(tb, tenant, flt, nil)
}

// scripts counts the list script calls of a store (Options.ScriptObserver).
type scripts struct{ list atomic.Int64 }

func (c *scripts) ObserveScript(name string, _ time.Duration, _ error) {
	if name == "list" {
		c.list.Add(1)
	}
}

// servers is the number of servers that hold a shard of tenant: one, but on
// a Cluster the masters of its shards' slots (CLUSTER SLOTS).
func (f *fixture) servers(tb testing.TB, tenant string) int {
	tb.Helper()
	cc, ok := f.rdb.(*redis.ClusterClient)
	if !ok {
		return 1
	}
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		tb.Fatal(err)
	}
	masters := map[string]bool{}
	for _, tag := range store.TenantTags(f.s, tenant) {
		slot, err := cc.ClusterKeySlot(ctx, tag).Result()
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range ranges {
			if int64(r.Start) <= slot && slot <= int64(r.End) {
				masters[r.Nodes[0].Addr] = true
			}
		}
	}
	return len(masters)
}

// listFull is listAll that also requires every page to take a single list
// script call (obs counts them): with nothing changing and the default scan
// budget, another call means the script handed out ids that do not match, which
// the store then drops and replaces.
func (f *fixture) listFull(tb testing.TB, tenant string, flt domain.ListFilter, obs *scripts) []string {
	tb.Helper()
	ids, _ := f.listPages(tb, tenant, flt, obs)
	return ids
}

func (f *fixture) listPages(tb testing.TB, tenant string, flt domain.ListFilter, obs *scripts) (ids []string, pages int) {
	tb.Helper()
	seen := map[string]bool{}
	for pages = 1; ; pages++ {
		var before int64
		if obs != nil {
			before = obs.list.Load()
		}
		p, err := f.s.List(ctx, inTenant(tenant, flt))
		if err != nil {
			tb.Fatalf("list page %d: %v", pages, err)
		}
		if obs != nil {
			// one list script call per server holding a shard, all in one pipeline
			if n, want := obs.list.Load()-before, f.servers(tb, tenant); n != int64(want) {
				tb.Fatalf("page %d of %+v took %d list script calls, want %d", pages, flt, n, want)
			}
			if p.NextCursor != "" && len(p.Items) != flt.Limit {
				tb.Fatalf("page %d of %+v has %d items, want %d", pages, flt, len(p.Items), flt.Limit)
			}
		}
		for _, r := range p.Items {
			if seen[r.ID] {
				tb.Fatalf("page %d repeats %s", pages, r.ID)
			}
			seen[r.ID] = true
			ids = append(ids, r.ID)
		}
		if p.NextCursor == "" {
			return ids, pages
		}
		if pages > 1000 {
			tb.Fatal("listing does not end")
		}
		flt.Cursor = p.NextCursor
	}
}

func TestListPagination(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		m := f.seed(t, "acme", 20, "a", "b")
		f.mustCreate(t, "globex", "a") // another tenant never shows

		p, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}})
		if err != nil || len(p.Items) != 20 || p.NextCursor != "" {
			t.Fatalf("one page of everything: %d items, cursor %q, %v", len(p.Items), p.NextCursor, err)
		}
		want := expect(m, nil)
		for i, r := range p.Items {
			if r.ID != want[i] {
				t.Fatalf("item %d is %s, want %s", i, r.ID, want[i])
			}
			if e := m[r.ID]; r.Status != e.status || r.Type != e.typ || r.Events != nil || r.Version < 1 {
				t.Fatalf("item %+v, want %+v", r, e)
			}
		}
		for _, limit := range []int{1, 3, 5, 7, 19, 20, 21} {
			got, pages := f.listAll(t, "acme", domain.ListFilter{Limit: limit})
			if !slices.Equal(got, want) {
				t.Fatalf("limit %d: pages give\n%v\nwant\n%v", limit, got, want)
			}
			// an exact multiple ends without an empty trailing page
			if wantPages := (20 + limit - 1) / limit; pages != wantPages {
				t.Fatalf("limit %d: %d pages, want %d", limit, pages, wantPages)
			}
		}
		// the page size may change from page to page
		p1, _ := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, Limit: 4})
		p2, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, Limit: 10, Cursor: p1.NextCursor})
		if err != nil || len(p2.Items) != 10 || p2.Items[0].ID != want[4] {
			t.Fatalf("changing limit: %v", err)
		}
	})
}

func TestListFilters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		obs := &scripts{}
		f := listFixture(t, b, func(o *store.Options) { o.ScriptObserver = obs })
		m := f.seed(t, "acme", 36, "a", "b", "c")
		ids := expect(m, nil)
		mid := m[ids[len(ids)/2]].created
		late := m[ids[5]].created
		tm := func(t time.Time) *time.Time { return &t }
		cases := []struct {
			name string
			flt  domain.ListFilter
			keep func(entry) bool
		}{
			{"type", domain.ListFilter{Type: "b"}, func(e entry) bool { return e.typ == "b" }},
			{"unknown type", domain.ListFilter{Type: "zzz"}, func(e entry) bool { return false }},
			{"one status", domain.ListFilter{Statuses: []domain.Status{domain.StatusFailed}},
				func(e entry) bool { return e.status == domain.StatusFailed }},
			{"several statuses", domain.ListFilter{Statuses: []domain.Status{domain.StatusExpired, domain.StatusQueued, domain.StatusSucceeded}},
				func(e entry) bool {
					return e.status == domain.StatusQueued || e.status == domain.StatusSucceeded || e.status == domain.StatusExpired
				}},
			{"type and status", domain.ListFilter{Type: "c", Statuses: []domain.Status{domain.StatusProcessing}},
				func(e entry) bool { return e.typ == "c" && e.status == domain.StatusProcessing }},
			{"type and statuses", domain.ListFilter{Type: "a", Statuses: []domain.Status{domain.StatusCancelled, domain.StatusFailed, domain.StatusProcessing, domain.StatusQueued, domain.StatusSucceeded}},
				func(e entry) bool { return e.typ == "a" && e.status != domain.StatusExpired }},
			{"created_after inclusive", domain.ListFilter{CreatedAfter: tm(mid)},
				func(e entry) bool { return !e.created.Before(mid) }},
			{"created_before inclusive", domain.ListFilter{CreatedBefore: tm(mid)},
				func(e entry) bool { return !e.created.After(mid) }},
			{"between, with type and status", domain.ListFilter{CreatedAfter: tm(mid), CreatedBefore: tm(late), Type: "a", Statuses: []domain.Status{domain.StatusQueued, domain.StatusSucceeded}},
				func(e entry) bool {
					return !e.created.Before(mid) && !e.created.After(late) && e.typ == "a" && (e.status == domain.StatusQueued || e.status == domain.StatusSucceeded)
				}},
			{"sub-millisecond bounds", domain.ListFilter{CreatedAfter: tm(mid.Add(-time.Microsecond)), CreatedBefore: tm(mid.Add(time.Microsecond))},
				func(e entry) bool { return e.created.Equal(mid) }},
			{"empty range", domain.ListFilter{CreatedAfter: tm(late.Add(time.Millisecond)), CreatedBefore: tm(late)},
				func(e entry) bool { return false }},
		}
		for _, c := range cases {
			want := expect(m, c.keep)
			for _, limit := range []int{2, 50} {
				c.flt.Limit = limit
				got := f.listFull(t, "acme", c.flt, obs)
				if !slices.Equal(got, want) {
					t.Fatalf("%s, limit %d: got %d\n%v\nwant %d\n%v", c.name, limit, len(got), got, len(want), want)
				}
			}
		}
	})
}

func TestListTypeAndStatus(t *testing.T) {
	// Type and status filters read exactly their (status, type) indexes: a rare
	// type, a rare status and an empty intersection all give full pages, each
	// from one list script call, and exactly the intersection.
	forEachBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		// the same data through a store whose script calls are counted
		fb := &fixture{rdb: f.rdb, clock: f.clock, prefix: f.prefix, shards: f.shards}
		obs := &scripts{}
		var err error
		if fb.s, err = store.New(f.rdb, store.Options{Prefix: f.prefix, TenantShards: f.shards, Now: f.clock.Now, OpTimeout: 5 * time.Second, ScriptObserver: obs}); err != nil {
			t.Fatal(err)
		}
		m := map[string]entry{}
		for i := range 40 {
			typ := "a"
			switch {
			case i%8 == 3:
				typ = "rare" // 5 of them
			case i%2 == 1:
				typ = "b"
			}
			r := f.mustCreate(t, "acme", typ)
			st := domain.StatusSucceeded
			if i%4 == 1 || i == 8 || i == 30 || i == 35 {
				st = domain.StatusFailed // 13, of which 2 "a" and 1 "rare"
			}
			f.moveTo(t, "acme", r.ID, st)
			m[r.ID] = entry{typ: typ, status: st}
		}
		for _, flt := range []domain.ListFilter{
			{Type: "a", Statuses: []domain.Status{domain.StatusFailed}},                             // status side smaller
			{Type: "rare", Statuses: []domain.Status{domain.StatusFailed, domain.StatusSucceeded}},  // type side smaller, dense
			{Type: "rare", Statuses: []domain.Status{domain.StatusFailed, domain.StatusCancelled}},  // type side smaller, sparse
			{Type: "b", Statuses: []domain.Status{domain.StatusSucceeded}},                          // about even
			{Type: "a", Statuses: []domain.Status{domain.StatusCancelled, domain.StatusProcessing}}, // empty intersection
		} {
			want := expect(m, func(e entry) bool { return e.typ == flt.Type && slices.Contains(flt.Statuses, e.status) })
			for _, limit := range []int{1, 3, 200} {
				flt.Limit = limit
				got, _ := f.listAll(t, "acme", flt)
				if !slices.Equal(got, want) {
					t.Fatalf("%s/%v limit %d: got %v want %v", flt.Type, flt.Statuses, limit, got, want)
				}
				// pages are full, one script call each
				if got := fb.listFull(t, "acme", flt, obs); !slices.Equal(got, want) {
					t.Fatalf("%s/%v limit %d, counted: got %v want %v", flt.Type, flt.Statuses, limit, got, want)
				}
			}
		}
	})
}

func TestListInvalidCursor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		f.seed(t, "acme", 6, "a")
		f.seed(t, "globex", 6, "a")
		p, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, Limit: 2, Type: "a"})
		if err != nil || p.NextCursor == "" {
			t.Fatalf("first page: %v", err)
		}
		c := p.NextCursor
		raw, _ := base64.RawURLEncoding.DecodeString(c)
		flipped := slices.Clone(raw)
		flipped[12] ^= 1
		after := time.Now().Add(-time.Hour)
		for name, try := range map[string]struct {
			tenant string
			flt    domain.ListFilter
		}{
			"other type":       {"acme", domain.ListFilter{Type: "b", Cursor: c}},
			"no type":          {"acme", domain.ListFilter{Cursor: c}},
			"added status":     {"acme", domain.ListFilter{Type: "a", Statuses: []domain.Status{domain.StatusQueued}, Cursor: c}},
			"added time":       {"acme", domain.ListFilter{Type: "a", CreatedAfter: &after, Cursor: c}},
			"other tenant":     {"globex", domain.ListFilter{Type: "a", Cursor: c}},
			"garbled":          {"acme", domain.ListFilter{Type: "a", Cursor: "not a cursor"}},
			"truncated":        {"acme", domain.ListFilter{Type: "a", Cursor: c[:len(c)-2]}},
			"extended":         {"acme", domain.ListFilter{Type: "a", Cursor: c + "AA"}},
			"one bit":          {"acme", domain.ListFilter{Type: "a", Cursor: base64.RawURLEncoding.EncodeToString(flipped)}},
			"padded encoding":  {"acme", domain.ListFilter{Type: "a", Cursor: base64.URLEncoding.EncodeToString(raw)}},
			"standard base64":  {"acme", domain.ListFilter{Type: "a", Cursor: base64.StdEncoding.EncodeToString(raw) + "/"}},
			"empty but base64": {"acme", domain.ListFilter{Type: "a", Cursor: "AAAA"}},
		} {
			_, err := f.s.List(ctx, inTenant(try.tenant, try.flt))
			if domain.ErrorCode(err) != domain.InvalidCursor {
				t.Errorf("%s: %v, want INVALID_CURSOR", name, err)
			}
		}
		if _, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, Type: "a", Limit: 3, Cursor: c}); err != nil {
			t.Fatalf("the same filters with another limit: %v", err)
		}
	})
}

func TestListStableUnderChanges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		m := f.seed(t, "acme", 30, "a", "b")
		want := expect(m, nil)
		flt := domain.ListFilter{Limit: 7}
		var got []string
		deleted := map[string]bool{}
		for page := 0; ; page++ {
			p, err := f.s.List(ctx, inTenant("acme", flt))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Items {
				got = append(got, r.ID)
			}
			if p.NextCursor == "" {
				break
			}
			flt.Cursor = p.NextCursor
			// between pages: new requests, transitions of requests on both sides of
			// the cursor, deletions of requests not listed yet
			f.mustCreate(t, "acme", "a")
			last := p.Items[len(p.Items)-1].ID
			for _, id := range want {
				if id >= last || m[id].status != domain.StatusQueued {
					continue
				}
				f.moveTo(t, "acme", id, domain.StatusProcessing)
				e := m[id]
				e.status = domain.StatusProcessing
				m[id] = e
				break
			}
			for _, id := range want {
				if id < last && !deleted[id] && m[id].status == domain.StatusFailed {
					if err := f.s.Delete(ctx, "acme", id); err != nil {
						t.Fatal(err)
					}
					deleted[id] = true
					break
				}
			}
		}
		var survivors []string
		for _, id := range want {
			if !deleted[id] {
				survivors = append(survivors, id)
			}
		}
		if !slices.Equal(got, survivors) {
			t.Fatalf("got\n%v\nwant the survivors\n%v", got, survivors)
		}
	})
}

func TestListUnderConcurrentWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		m := f.seed(t, "acme", 60, "a", "b", "c")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var writes, creates atomic.Int64
		var deletedMu sync.Mutex
		deleted := map[string]bool{}
		ids := expect(m, nil)
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					id := ids[(i*7+w*13)%len(ids)]
					switch i % 4 {
					case 0:
						// Bounded: every create lengthens the next walks (they start
						// from the newest), and on a slow run (-race, S > 1 on
						// miniredis) unbounded writers outran the walks.
						if creates.Add(1) <= 300 {
							_, _, _ = f.s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "acme"}, Input: domain.CreateInput{Type: "a"}})
						}
					case 1:
						_, _ = f.s.MarkProcessing(ctx, tp("acme", id), domain.ProgressInput{})
					case 2:
						_, _ = f.s.Complete(ctx, tp("acme", id), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)})
					case 3:
						if w == 0 && i%12 == 3 {
							deletedMu.Lock()
							deleted[id] = true // marked before: a listing may or may not show it
							deletedMu.Unlock()
							_ = f.s.Delete(ctx, "acme", id)
						}
					}
					writes.Add(1)
				}
			}()
		}
		for round := 0; round < 5; round++ {
			for _, flt := range []domain.ListFilter{{Limit: 4}, {Limit: 9, Type: "b"}} {
				got, _ := f.listAll(t, "acme", flt) // fails on duplicates
				in := map[string]bool{}
				for _, id := range got {
					in[id] = true
				}
				deletedMu.Lock()
				for _, id := range ids {
					if !deleted[id] && !in[id] && (flt.Type == "" || m[id].typ == flt.Type) {
						deletedMu.Unlock()
						t.Fatalf("round %d %+v: survivor %s skipped", round, flt, id)
					}
				}
				deletedMu.Unlock()
				for i := 1; i < len(got); i++ {
					if got[i] >= got[i-1] {
						t.Fatalf("out of order: %s after %s", got[i], got[i-1])
					}
				}
			}
		}
		close(stop)
		wg.Wait()
		if writes.Load() == 0 {
			t.Fatal("no concurrent writes happened")
		}
	})
}

func TestListHidesGoneRecords(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, func(o *store.Options) { o.Retention = time.Hour })
		m := f.seed(t, "acme", 12, "a")
		f.clock.Add(time.Hour) // every terminal record is past expires_at; no sweep ran
		want := expect(m, func(e entry) bool { return !e.status.Terminal() })
		for _, flt := range []domain.ListFilter{{}, {Limit: 1}, {Type: "a"}, {Statuses: []domain.Status{domain.StatusSucceeded, domain.StatusQueued}}} {
			got, _ := f.listAll(t, "acme", flt)
			var w []string
			for _, id := range want {
				if len(flt.Statuses) == 0 || m[id].status == domain.StatusQueued {
					w = append(w, id)
				}
			}
			if !slices.Equal(got, w) {
				t.Fatalf("%+v: got %v want %v", flt, got, w)
			}
		}
	})
}

func TestListFrozen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		f.seed(t, "acme", 2, "a")
		if err := f.s.SetFrozen(ctx, "acme", true); err != nil {
			t.Fatal(err)
		}
		_, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}})
		wantCode(t, err, domain.TenantFrozen)
		if err := f.s.SetFrozen(ctx, "acme", false); err != nil {
			t.Fatal(err)
		}
		if p, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}}); err != nil || len(p.Items) != 2 {
			t.Fatalf("after unfreeze: %v", err)
		}
	})
}

func TestListEmptyTenant(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		p, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "nobody"}, Type: "a", Statuses: []domain.Status{domain.StatusQueued}})
		if err != nil || len(p.Items) != 0 || p.NextCursor != "" || p.Items == nil {
			t.Fatalf("empty listing: %+v %v", p, err)
		}
	})
}

func TestListLargePage(t *testing.T) {
	// The largest page in one read: the embedded store's connection must not
	// choke on it (it deadlocks on pipelines over 4 KiB).
	forEachBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		m := map[string]entry{}
		for range domain.MaxListLimit + 10 {
			r := f.mustCreate(t, "a-rather-long-tenant-name-to-make-keys-long", "some.long.request.type")
			m[r.ID] = entry{}
		}
		want := expect(m, nil)
		for _, flt := range []domain.ListFilter{{Limit: domain.MaxListLimit}, {Limit: domain.MaxListLimit, Type: "some.long.request.type"}} {
			p, err := f.s.List(ctx, inTenant("a-rather-long-tenant-name-to-make-keys-long", flt))
			if err != nil || len(p.Items) != domain.MaxListLimit || p.NextCursor == "" || p.Items[0].ID != want[0] {
				t.Fatalf("page of %d: %d items, %v", domain.MaxListLimit, len(p.Items), err)
			}
			got, _ := f.listAll(t, "a-rather-long-tenant-name-to-make-keys-long", flt)
			if !slices.Equal(got, want) {
				t.Fatalf("%+v: listing differs", flt)
			}
		}
	})
}

// TestListAfterSlotMoved: a listing whose slot map is stale, so that one call
// names shards another master holds, still lists every request once and in
// order. On the Cluster that call fails on the real server's refusal (a key
// of a slot it does not serve) and the round is asked again shard by shard,
// which the call count shows; one server holds every shard, so elsewhere the
// one call is right.
func TestListAfterSlotMoved(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		obs := &scripts{}
		f := newFixture(t, b, func(o *store.Options) { o.ScriptObserver = obs })
		var want []string
		for i := range 30 {
			r := f.mustCreate(t, "acme", fmt.Sprintf("t%d", i%4))
			want = append(want, r.ID)
			f.clock.Add(time.Millisecond)
		}
		slices.Reverse(want)
		store.StaleShardGroups(f.s, func(n int) [][]int {
			all := make([]int, n)
			for i := range all {
				all[i] = i
			}
			return [][]int{all}
		})
		calls := int64(1)
		if _, ok := f.rdb.(*redis.ClusterClient); ok && f.shards > 1 {
			calls = 1 + int64(f.shards) // the refused call, then one per shard
		}
		var got []string
		cursor := ""
		for page := 1; ; page++ {
			before := obs.list.Load()
			p, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, Limit: 7, Cursor: cursor})
			if err != nil {
				t.Fatalf("page %d: %v", page, err)
			}
			if n := obs.list.Load() - before; n != calls {
				t.Fatalf("page %d took %d list script calls, want %d", page, n, calls)
			}
			for _, r := range p.Items {
				got = append(got, r.ID)
			}
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listed\n%v\nwant\n%v", got, want)
		}
	})
}
