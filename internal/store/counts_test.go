package store_test

import (
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
)

// TestCounts: exact counts by status under type, one label term and time
// bounds, on every backend and with tenant shards; records past retention
// never count, also before the sweeper reaches them, nor deleted ones.
func TestCounts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// timeouts far beyond the clock moves below, so only retention changes counts
		f := newFixture(t, b, func(o *store.Options) {
			o.Retention, o.QueuedTimeout, o.ProcessingTimeout = time.Hour, 48*time.Hour, 48*time.Hour
		})
		type made struct {
			r  *domain.Request
			st domain.Status
		}
		var all []made
		statuses := []domain.Status{domain.StatusQueued, domain.StatusProcessing, domain.StatusSucceeded,
			domain.StatusFailed, domain.StatusCancelled, domain.StatusProcessing, domain.StatusQueued}
		for i := range 28 {
			ls := domain.MakeLabels([]domain.Label{{Name: "env", Value: []string{"prod", "dev"}[i%2]}})
			r := f.mustCreateLabelled(t, "acme", []string{"x", "y", "z"}[i%3], ls)
			st := statuses[i%len(statuses)]
			f.moveTo(t, "acme", r.ID, st)
			all = append(all, made{r, st})
			f.clock.Add(time.Millisecond)
		}
		f.mustCreateLabelled(t, "globex", "x", "env=prod")
		del := f.mustCreateLabelled(t, "acme", "x", "env=prod")
		if err := f.s.Delete(ctx, "acme", del.ID); err != nil {
			t.Fatal(err)
		}
		want := func(lf domain.ListFilter, gone func(made) bool) domain.StatusCounts {
			var c domain.StatusCounts
			for _, m := range all {
				if gone != nil && gone(m) {
					continue
				}
				if lf.Type != "" && m.r.Type != lf.Type {
					continue
				}
				if v, ok := lf.LabelSelector.Pairs(), true; ok && len(v) == 1 {
					if got, _ := m.r.Labels.Get(v[0].Name); got != v[0].Value {
						continue
					}
				}
				if lf.CreatedAfter != nil && m.r.CreatedAt.Before(*lf.CreatedAfter) || lf.CreatedBefore != nil && m.r.CreatedAt.After(*lf.CreatedBefore) {
					continue
				}
				switch m.st {
				case domain.StatusQueued:
					c.Queued++
				case domain.StatusProcessing:
					c.Processing++
				case domain.StatusSucceeded:
					c.Succeeded++
				case domain.StatusFailed:
					c.Failed++
				case domain.StatusCancelled:
					c.Cancelled++
				}
			}
			return c
		}
		mid := all[14].r.CreatedAt.Time
		filters := []domain.ListFilter{{}, {Type: "y"}, {LabelSelector: "env=prod"}, {LabelSelector: "env=dev", CreatedAfter: &mid},
			{Type: "x", CreatedBefore: &mid}, {LabelSelector: "env=nowhere"}}
		check := func(gone func(made) bool) {
			t.Helper()
			for _, lf := range filters {
				got, err := f.s.Counts(ctx, inTenant("acme", lf))
				if err != nil {
					t.Fatal(err)
				}
				if w := want(lf, gone); got != w {
					t.Errorf("%+v: got %+v, want %+v", lf, got, w)
				}
			}
		}
		check(nil)

		// past retention (by the store's clock: Redis has not expired them),
		// not yet swept: not counted
		f.clock.Add(2 * time.Hour)
		terminalGone := func(m made) bool { return m.st.Terminal() }
		check(terminalGone)
		mustTick(t, f.sweeper(sweep.Options{}))
		check(terminalGone)

		if err := f.s.SetFrozen(ctx, "acme", true); err != nil {
			t.Fatal(err)
		}
		_, err := f.s.Counts(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}})
		wantCode(t, err, domain.TenantFrozen)
	})
}
