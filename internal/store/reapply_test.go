package store_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
)

func TestReapplyRetention(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) { o.Retention = time.Hour })
		f.catchUp()
		ids := map[string]string{}
		for _, typ := range []string{"x", "keep", "short", "gone"} {
			r := f.mustCreate(t, "acme", typ)
			f.moveTo(t, "acme", r.ID, domain.StatusSucceeded)
			ids[typ] = r.ID
		}
		live := f.mustCreate(t, "acme", "x")
		other := f.mustCreate(t, "globex", "x")
		f.moveTo(t, "globex", other.ID, domain.StatusCancelled)
		// "gone" is past its old retention already (no sweep has run): it stays gone
		// even though the new configuration would keep it longer.
		setRecordField(t, f.rdb, f.key("acme", ids["gone"], ":r:"+ids["gone"]), 3, "1") // expires_at

		f.clock.Add(10 * time.Minute)

		// ops change the configuration: 2h by default, "keep" forever, "short" 1m
		next, err := store.New(f.rdb, store.Options{Prefix: f.prefix, TenantShards: f.shards, OpTimeout: 5 * time.Second, Now: f.clock.Now,
			Retention: 2 * time.Hour, RetentionByType: map[string]time.Duration{"keep": 0, "short": time.Minute, "gone": 0}})
		if err != nil {
			t.Fatal(err)
		}
		// a dry run counts and changes nothing
		dry, err := next.ReapplyRetention(ctx, store.ReapplyOptions{Tenant: "acme", DryRun: true})
		if err != nil || dry.Updated != 2 || dry.Deleted != 2 {
			t.Fatalf("dry run %+v %v", dry, err)
		}
		if got := f.mustGet(t, "acme", ids["x"]); got.ExpiresAt.Sub(got.CompletedAt.Time) != time.Hour {
			t.Fatal("the dry run changed a record")
		}
		if _, err := f.s.Events(ctx, "acme", ids["short"]); err != nil {
			t.Fatalf("the dry run deleted a record: %v", err)
		}

		var reports []store.ReapplyProgress
		p, err := next.ReapplyRetention(ctx, store.ReapplyOptions{Tenant: "acme", Progress: func(p store.ReapplyProgress) { reports = append(reports, p) }})
		if err != nil {
			t.Fatal(err)
		}
		if p.Tenants != 1 || p.Seen != 4 || p.Updated != 2 || p.Deleted != 2 || p.Unchanged != 0 || p.Skipped != 0 {
			t.Fatalf("progress %+v", p)
		}
		if len(reports) == 0 || reports[len(reports)-1] != p {
			t.Fatalf("progress reports %+v", reports)
		}

		x := f.mustGet(t, "acme", ids["x"])
		if x.ExpiresAt == nil || x.ExpiresAt.Sub(x.CompletedAt.Time) != 2*time.Hour {
			t.Fatalf("x: expires_at %v completed_at %v", x.ExpiresAt, x.CompletedAt)
		}
		rec := f.key("acme", ids["x"], ":r:"+ids["x"])
		if ttl := f.rdb.PTTL(ctx, rec).Val(); ttl < time.Hour+30*time.Minute || ttl > 2*time.Hour {
			t.Fatalf("x: TTL %v, want about 1h50m", ttl)
		}
		// listed in the retention bucket of its new expires_at (default width 10 s)
		end := strconv.FormatInt((x.ExpiresAt.UnixMilli()/10000+1)*10000, 10)
		if !slices.Contains(f.rdb.LRange(ctx, f.key("acme", ids["x"], ":rb:"+end), 0, -1).Val(), "s"+ids["x"]+"x") ||
			!zscore(t, f.rdb, f.key("acme", ids["x"], ":rbi"), end) {
			t.Fatalf("x: no retention bucket entry at %s", end)
		}

		k := f.mustGet(t, "acme", ids["keep"])
		if k.ExpiresAt != nil || f.rdb.PTTL(ctx, f.key("acme", ids["keep"], ":r:"+ids["keep"])).Val() != -1 {
			t.Fatalf("keep: expires_at %v; must be kept forever", k.ExpiresAt)
		}

		for _, typ := range []string{"short", "gone"} {
			id := ids[typ]
			_, _, err := pollOf(f.s, "acme", id, "")
			wantCode(t, err, domain.NotFound)
			for _, key := range []string{":r:" + id, ":ix:s:" + typ} {
				if key[1] == 'r' {
					if f.rdb.Exists(ctx, f.key("acme", id, key)).Val() != 0 {
						t.Fatalf("%s: record left", typ)
					}
				} else if zscore(t, f.rdb, f.key("acme", id, key), id) {
					t.Fatalf("%s: %s still lists it", typ, key)
				}
			}
		}
		if got := f.mustGet(t, "acme", live.ID); got.Status != domain.StatusQueued || got.ExpiresAt != nil {
			t.Fatalf("a live request changed: %+v", got)
		}
		if got := f.mustGet(t, "globex", other.ID); got.ExpiresAt.Sub(got.CompletedAt.Time) != time.Hour {
			t.Fatal("another tenant changed")
		}

		// Again: nothing to do. Then every tenant.
		if p, err := next.ReapplyRetention(ctx, store.ReapplyOptions{Tenant: "acme"}); err != nil || p.Unchanged != 2 || p.Updated+p.Deleted != 0 {
			t.Fatalf("second run: %+v %v", p, err)
		}
		p, err = next.ReapplyRetention(ctx, store.ReapplyOptions{})
		if err != nil || p.Tenants != 2 || p.Updated != 1 || p.Unchanged != 2 {
			t.Fatalf("all tenants: %+v %v", p, err)
		}
		if got := f.mustGet(t, "globex", other.ID); got.ExpiresAt.Sub(got.CompletedAt.Time) != 2*time.Hour {
			t.Fatalf("globex: %v", got.ExpiresAt)
		}
	})
}

func TestReapplyManyRecords(t *testing.T) {
	// More records than one batch, and every terminal status.
	forEachBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, func(o *store.Options) { o.Retention = 0 })
		m := f.seed(t, "acme", 450, "a", "b", "c")
		next, err := store.New(f.rdb, store.Options{Prefix: f.prefix, TenantShards: f.shards, Now: f.clock.Now, Retention: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		p, err := next.ReapplyRetention(ctx, store.ReapplyOptions{Tenant: "acme", Progress: func(store.ReapplyProgress) { calls++ }})
		terminal := len(expect(m, func(e entry) bool { return e.status.Terminal() }))
		if err != nil || p.Seen != int64(terminal) || p.Updated != int64(terminal) || calls < 2 {
			t.Fatalf("progress %+v (%d reports), want %d updated: %v", p, calls, terminal, err)
		}
		n := int64(0)
		for _, tag := range store.TenantTags(f.s, "acme") {
			for _, end := range f.rdb.ZRange(ctx, f.prefix+":"+tag+":rbi", 0, -1).Val() {
				n += f.rdb.LLen(ctx, f.prefix+":"+tag+":rb:"+end).Val()
			}
		}
		if n != int64(terminal) {
			t.Fatalf("retention buckets hold %d entries, want %d", n, terminal)
		}
	})
}

// setRecordField rewrites field i (0-based, record.go's layout) of the
// record at key, keeping its TTL.
func setRecordField(tb testing.TB, rdb redis.UniversalClient, key string, i int, v string) {
	tb.Helper()
	rec, err := rdb.Get(ctx, key).Result()
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Split(rec, "\x1f")
	f[i] = v
	if err := rdb.SetArgs(ctx, key, strings.Join(f, "\x1f"), redis.SetArgs{KeepTTL: true}).Err(); err != nil {
		tb.Fatal(err)
	}
}
