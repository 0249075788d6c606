package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
)

// heads is the index-head summary of status letter st in tenant's shard sh:
// type -> score.
func (f *fixture) heads(tb testing.TB, tenant string, sh int, st string) map[string]float64 {
	tb.Helper()
	zs, err := f.rdb.ZRangeWithScores(ctx, f.prefix+":"+store.TenantTags(f.s, tenant)[sh]+":ixh:"+st, 0, -1).Result()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for _, z := range zs {
		out[z.Member.(string)] = z.Score
	}
	return out
}

// A first round asks each shard for its share of the page only; a shard that
// holds more than that must not let another shard's older ids onto the page
// ahead of its own newer ones.
func TestListShardHoldingThePage(t *testing.T) {
	forEachShardedBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		var want []string
		for range 60 {
			want = append(want, f.mustCreateInShard(t, "acme", "x", 1).ID)
		}
		time.Sleep(2 * time.Millisecond) // every later id sorts above
		for i := range 60 {
			want = append(want, f.mustCreateInShard(t, "acme", fmt.Sprintf("t%d", i%3), 0).ID)
		}
		slices.Reverse(want)
		for _, flt := range []domain.ListFilter{{Limit: 50}, {Limit: 50, Statuses: []domain.Status{domain.StatusQueued}}, {Limit: 50, Type: "x"}} {
			keep := want
			if flt.Type != "" {
				keep = want[60:]
			}
			p, err := f.s.List(ctx, inTenant("acme", flt))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != 50 || p.Items[0].ID != keep[0] || p.Items[49].ID != keep[49] {
				t.Fatalf("%+v: first page has %d items, %s..., want the %d newest of shard 0", flt, len(p.Items), p.Items[0].ID, 50)
			}
			if got, _ := f.listAll(t, "acme", flt); !slices.Equal(got, keep) {
				t.Fatalf("%+v: walk gives %d ids\n%v\nwant %d\n%v", flt, len(got), got, len(keep), keep)
			}
		}
	})
}

// A shard written before the index-head summaries existed (no summary, no lh
// flag; or a summary that missed a writer) is listed whole: the first lazy
// listing builds the summaries from the indexes.
func TestListBuildsHeadsOfAnOlderShard(t *testing.T) {
	forEachShardedBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		m := f.seed(t, "acme", 48, "a", "b", "c")
		want := expect(m, nil)
		for _, tag := range store.TenantTags(f.s, "acme") {
			for _, st := range []string{"q", "p", "s", "f", "c", "e"} {
				f.rdb.Del(ctx, f.prefix+":"+tag+":ixh:"+st)
			}
			f.rdb.HDel(ctx, f.prefix+":"+tag+":m", "lh")
		}
		// and a summary that an older writer left behind, too low
		f.rdb.ZAdd(ctx, f.prefix+":"+store.TenantTags(f.s, "acme")[0]+":ixh:s", redis.Z{Score: 1, Member: "a"})
		for _, limit := range []int{5, 50} {
			if got, _ := f.listAll(t, "acme", domain.ListFilter{Limit: limit}); !slices.Equal(got, want) {
				t.Fatalf("limit %d: got %d ids, want %d", limit, len(got), len(want))
			}
		}
		failed := expect(m, func(e entry) bool { return e.status == domain.StatusFailed })
		if got, _ := f.listAll(t, "acme", domain.ListFilter{Limit: 3, Statuses: []domain.Status{domain.StatusFailed}}); !slices.Equal(got, failed) {
			t.Fatalf("failed: got %v, want %v", got, failed)
		}
		for sh, tag := range store.TenantTags(f.s, "acme") {
			if v := f.rdb.HGet(ctx, f.prefix+":"+tag+":m", "lh").Val(); v != "1" {
				t.Fatalf("shard %d: lh = %q after a listing, want 1", sh, v)
			}
		}
		// every request's index has its head in the summary, at least as new
		for id, e := range m {
			sh := store.ShardOf(id)
			if got := f.heads(t, "acme", sh, statusLetter[e.status])[e.typ]; got < float64(e.created.UnixMilli()) {
				t.Fatalf("%s (%s %s, shard %d): summary score %v below its created_at %d", id, e.status, e.typ, sh, got, e.created.UnixMilli())
			}
		}
	})
}

// Removals leave a summary's score high (a queued request that moved on while
// older ones wait), or, where they do not empty the index themselves (retention
// reapply), a member whose index is empty: the listing stays exact, and a first
// page lowers the score to the index's real head or drops the member. A writer
// that empties an index drops its member at once.
func TestListLowersStaleHeads(t *testing.T) {
	forEachShardedBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil)
		// a first listing builds the (empty) summaries: from here on they are kept
		if _, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}}); err != nil {
			t.Fatal(err)
		}
		var old, moved []*domain.Request
		for range 3 {
			old = append(old, f.mustCreateInShard(t, "acme", "a", 0))
		}
		time.Sleep(2 * time.Millisecond)
		for range 4 {
			r := f.mustCreateInShard(t, "acme", "a", 0)
			f.moveTo(t, "acme", r.ID, domain.StatusSucceeded)
			moved = append(moved, r)
		}
		deleted := f.mustCreateInShard(t, "acme", "d", 0)
		if err := f.s.Delete(ctx, "acme", deleted.ID); err != nil {
			t.Fatal(err)
		}
		// an index emptied the way retention reapply does it: its member stays
		reaped := f.mustCreateInShard(t, "acme", "b", 0)
		tag := store.TenantTags(f.s, "acme")[0]
		f.rdb.ZRem(ctx, f.prefix+":"+tag+":ix:q:b", reaped.ID)
		f.rdb.Del(ctx, f.prefix+":"+tag+":r:"+reaped.ID)
		q := f.heads(t, "acme", 0, "q")
		if _, ok := q["d"]; ok || len(q) != 2 || q["a"] != float64(moved[3].CreatedAt.UnixMilli()) || q["b"] != float64(reaped.CreatedAt.UnixMilli()) {
			t.Fatalf("queued summary before listing: %v", q)
		}
		want := []string{moved[3].ID, moved[2].ID, moved[1].ID, moved[0].ID, old[2].ID, old[1].ID, old[0].ID}
		for _, limit := range []int{1, 2, 50} {
			if got, _ := f.listAll(t, "acme", domain.ListFilter{Limit: limit}); !slices.Equal(got, want) {
				t.Fatalf("limit %d: got %v, want %v", limit, got, want)
			}
		}
		queued := []string{old[2].ID, old[1].ID, old[0].ID}
		if got, _ := f.listAll(t, "acme", domain.ListFilter{Limit: 2, Statuses: []domain.Status{domain.StatusQueued}}); !slices.Equal(got, queued) {
			t.Fatalf("queued: got %v, want %v", got, queued)
		}
		q = f.heads(t, "acme", 0, "q")
		if _, ok := q["b"]; ok || q["a"] != float64(old[2].CreatedAt.UnixMilli()) {
			t.Fatalf("queued summary after a first page: %v, want only a at %d", q, old[2].CreatedAt.UnixMilli())
		}
		if s := f.heads(t, "acme", 0, "s"); s["a"] != float64(moved[3].CreatedAt.UnixMilli()) {
			t.Fatalf("succeeded summary: %v", s)
		}
		// a writer raises a lowered score again
		r := f.mustCreateInShard(t, "acme", "b", 0)
		if got, _ := f.listAll(t, "acme", domain.ListFilter{Limit: 1, Statuses: []domain.Status{domain.StatusQueued}}); len(got) != 4 || got[0] != r.ID {
			t.Fatalf("queued after a new create: %v", got)
		}
	})
}

var statusLetter = map[domain.Status]string{
	domain.StatusQueued: "q", domain.StatusProcessing: "p", domain.StatusSucceeded: "s",
	domain.StatusFailed: "f", domain.StatusCancelled: "c", domain.StatusExpired: "e",
}
