package store_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestLookupByIDs: ids= answers the visible requests among the ids, newest
// first, whatever shard holds them; ids the caller may not see are absent;
// the lookup counts one read per id asked; a frozen tenant is refused.
func TestLookupByIDs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) {
			o.Retention = time.Hour
			o.RateLimits = &ratelimit.Rates{Read: ratelimit.Rate{Limit: int64(30 * b.Shards), Period: time.Minute},
				Tenant: ratelimit.Rate{Limit: int64(1000 * b.Shards), Period: time.Minute}}
		})
		var mine []string
		for range 12 {
			mine = append(mine, f.mustCreate(t, "acme", "x").ID)
			f.clock.Add(time.Millisecond)
		}
		foreign := f.mustCreate(t, "globex", "x").ID
		deleted := f.mustCreate(t, "acme", "x").ID
		if err := f.s.Delete(ctx, "acme", deleted); err != nil {
			t.Fatal(err)
		}
		expired := f.mustCreate(t, "acme", "x").ID
		f.moveTo(t, "acme", expired, domain.StatusCancelled)
		f.clock.Add(2 * time.Hour) // past its retention by the store's clock
		f.moveTo(t, "acme", mine[3], domain.StatusSucceeded)

		ask := []string{mine[2], foreign, mine[9], "not-an-id", deleted, uuid.Must(uuid.NewV7()).String(), mine[3], expired, mine[9], mine[0]}
		var rate domain.RateInfo
		p, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme", Credential: "key_a", Rate: &rate}, IDs: ask})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range p.Items {
			got = append(got, r.ID)
		}
		if want := []string{mine[9], mine[3], mine[2], mine[0]}; !slices.Equal(got, want) || p.NextCursor != "" {
			t.Fatalf("lookup:\n got %v\nwant %v", got, want)
		}
		if p.Items[1].Status != domain.StatusSucceeded {
			t.Fatalf("stale state: %+v", p.Items[1])
		}
		if rate.Limit != 30 || rate.Remaining != 30-int64(len(ask)) {
			t.Fatalf("counted %+v, want %d reads", rate, len(ask))
		}
		// one call per server holding shards: one on a single server, at most
		// one per master on the cluster
		c := &testenv.RoundTrips{}
		f.rdb.AddHook(c)
		if _, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, IDs: mine}); err != nil {
			t.Fatal(err)
		}
		servers := int64(1)
		if strings.HasPrefix(b.Name, "cluster") && b.Shards > 1 {
			servers = 3
		}
		if n, m := c.Trips.Load(), c.Cmds.Load(); n > servers || m > servers {
			t.Fatalf("lookup of %d ids: %d round trips, %d commands; want at most %d", len(mine), n, m, servers)
		}
		// none visible: an empty page, not an error
		p, err = f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, IDs: []string{foreign, deleted}})
		if err != nil || len(p.Items) != 0 {
			t.Fatalf("%+v %v", p, err)
		}
		// the budget is spent by ids, not calls
		_, err = f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme", Credential: "key_a", Rate: &rate}, IDs: mine})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme", Credential: "key_a", Rate: &rate}, IDs: mine})
		wantCode(t, err, domain.RateLimited)

		if err := f.s.SetFrozen(ctx, "acme", true); err != nil {
			t.Fatal(err)
		}
		_, err = f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, IDs: mine[:1]})
		wantCode(t, err, domain.TenantFrozen)
	})
}
