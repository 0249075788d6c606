package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
)

// change names one change as a watch reports it.
func changeOf(r *domain.Request) string { return fmt.Sprintf("%s v%d %s", r.ID, r.Version, r.Status) }

// collect takes events of w until it has n changes (resets are counted as
// "reset"), waiting at most d in all.
func collect(tb testing.TB, w domain.TenantWatch, n int, d time.Duration) (got []string, last string) {
	tb.Helper()
	deadline := time.After(d)
	for len(got) < n {
		evs, wake, err := w.Next(ctx)
		if err != nil {
			tb.Fatalf("next: %v", err)
		}
		for _, e := range evs {
			last = e.ID
			if e.Reset {
				got = append(got, "reset")
				continue
			}
			got = append(got, changeOf(e.Request))
		}
		if len(got) >= n {
			break
		}
		select {
		case <-wake:
		case <-deadline:
			tb.Fatalf("only %d of %d changes within %s: %q", len(got), n, d, got)
		}
	}
	return got, last
}

// quiet asserts that w has nothing more for a moment (a change it should not
// report would be there by then: every change it does report came sooner).
func quietWatch(tb testing.TB, w domain.TenantWatch, marker func() string) {
	tb.Helper()
	// A change made now by the same writer is reported after everything
	// before it in its shard; with one shard per marker, it proves the
	// earlier ones were all delivered or dropped.
	want := marker()
	got, _ := collect(tb, w, 1, 10*time.Second)
	if got[0] != want {
		tb.Fatalf("after the last expected change the watch reported %q, want only the marker %q", got, want)
	}
}

func mustStart(tb testing.TB, s *store.Store, tenant, id string) *domain.Request {
	tb.Helper()
	r, err := s.MarkProcessing(ctx, domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: "key_a"}, ID: id}, domain.ProgressInput{})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func mustComplete(tb testing.TB, s *store.Store, tenant, id string) *domain.Request {
	tb.Helper()
	r, err := s.Complete(ctx, domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: "key_a"}, ID: id},
		domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"x":1}`)})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func createLabelled(tb testing.TB, s *store.Store, tenant, typ string, labels domain.Labels) *domain.Request {
	tb.Helper()
	r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: tenant, By: "key_a"}, Input: domain.CreateInput{Type: typ, Labels: labels}})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// A watch held on one replica reports every create, transition and
// heartbeat made through another, once each and in each request's order,
// and nothing of another tenant (docs/reference.md §16).
func TestWatchSeesEveryChangeFromAnotherReplica(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		other := f.replica(t)
		h := newHub(t, f.s)
		w, err := h.WatchTenant(ctx, domain.WatchParams{Call: domain.Call{Tenant: "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var want []string
		for i := range 6 {
			r := createLabelled(t, other, "acme", "export", "")
			want = append(want, changeOf(r))
			createLabelled(t, other, "intruder", "export", "") // another tenant: never seen
			r = mustStart(t, other, "acme", r.ID)
			want = append(want, changeOf(r))
			if i%2 == 0 {
				r = mustStart(t, other, "acme", r.ID) // a heartbeat
				want = append(want, changeOf(r))
			}
			r = mustComplete(t, other, "acme", r.ID)
			want = append(want, changeOf(r))
		}
		got, _ := collect(t, w, len(want), 10*time.Second)
		assertSameChanges(t, got, want)
		quietWatch(t, w, func() string { return changeOf(createLabelled(t, other, "acme", "marker", "")) })
	})
}

// assertSameChanges checks got holds exactly want's changes, each once, each
// request's in order (requests in different shards may interleave).
func assertSameChanges(tb testing.TB, got, want []string) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("got %d changes, want %d:\n got %q\nwant %q", len(got), len(want), got, want)
	}
	seen := map[string]bool{}
	for _, g := range got {
		if seen[g] {
			tb.Fatalf("change %q reported twice: %q", g, got)
		}
		seen[g] = true
	}
	for _, w := range want {
		if !seen[w] {
			tb.Fatalf("change %q missing: got %q", w, got)
		}
	}
	// per request, versions increase
	last := map[string]int64{}
	for _, g := range got {
		var id, st string
		var v int64
		fmt.Sscanf(g, "%s v%d %s", &id, &v, &st)
		if v <= last[id] {
			tb.Fatalf("request %s: version %d after %d: %q", id, v, last[id], got)
		}
		last[id] = v
	}
}

// The filters keep what they name: type, status after the change, labels.
func TestWatchFilters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		h := newHub(t, f.s)
		byType, err := h.WatchTenant(ctx, domain.WatchParams{Call: domain.Call{Tenant: "acme"}, Filter: domain.WatchFilter{Type: "export"}})
		if err != nil {
			t.Fatal(err)
		}
		defer byType.Close()
		byLabel, err := h.WatchTenant(ctx, domain.WatchParams{
			Call:   domain.Call{Tenant: "acme"},
			Filter: domain.WatchFilter{LabelSelector: "team=blue", Statuses: []domain.Status{domain.StatusSucceeded}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer byLabel.Close()
		a := createLabelled(t, f.s, "acme", "export", "team=blue")
		b2 := createLabelled(t, f.s, "acme", "import", "team=blue,zone=eu")
		c := createLabelled(t, f.s, "acme", "export", "team=red")
		wantType := []string{changeOf(a), changeOf(c)}
		var wantLabel []string
		for _, r := range []*domain.Request{a, b2, c} {
			d := mustComplete(t, f.s, "acme", r.ID)
			if r.Type == "export" {
				wantType = append(wantType, changeOf(d))
			}
			if r != c {
				wantLabel = append(wantLabel, changeOf(d))
			}
		}
		got, _ := collect(t, byType, len(wantType), 10*time.Second)
		assertSameChanges(t, got, wantType)
		got, _ = collect(t, byLabel, len(wantLabel), 10*time.Second)
		assertSameChanges(t, got, wantLabel)
		marker := createLabelled(t, f.s, "acme", "export", "team=blue")
		quietWatch(t, byType, func() string { return changeOf(marker) })
		quietWatch(t, byLabel, func() string { return changeOf(mustComplete(t, f.s, "acme", marker.ID)) })
	})
}

// A watch resumed from an event's id gets exactly the changes made after
// it, on any replica; one resumed from a position the logs no longer hold
// whole (past the replay window), or from a garbled one, starts with a reset
// and then goes on live.
func TestWatchResumes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) { o.ReplayWindow = time.Minute })
		other := f.replica(t)
		h1, h2 := newHub(t, f.s), newHub(t, other)
		w, err := h1.WatchTenant(ctx, domain.WatchParams{Call: domain.Call{Tenant: "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		a := createLabelled(t, f.s, "acme", "export", "")
		_, pos := collect(t, w, 1, 10*time.Second)
		w.Close() // the client leaves
		var want []string
		for range 5 {
			want = append(want, changeOf(createLabelled(t, f.s, "acme", "export", "")))
		}
		want = append(want, changeOf(mustComplete(t, f.s, "acme", a.ID)))
		w2, err := h2.WatchTenant(ctx, domain.WatchParams{Call: domain.Call{Tenant: "acme"}, LastEventID: pos})
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Close()
		got, _ := collect(t, w2, len(want), 10*time.Second)
		assertSameChanges(t, got, want)
		quietWatch(t, w2, func() string { return changeOf(createLabelled(t, f.s, "acme", "export", "")) })

		for _, bad := range []string{"garbled", "1-0.2", pos + "x", "99999999999999-0"} {
			w3, err := h2.WatchTenant(ctx, domain.WatchParams{Call: domain.Call{Tenant: "acme"}, LastEventID: bad})
			if err != nil {
				t.Fatal(err)
			}
			live := createLabelled(t, f.s, "acme", "export", "")
			got, _ := collect(t, w3, 2, 10*time.Second)
			if got[0] != "reset" || got[1] != changeOf(live) {
				t.Fatalf("resume from %q: got %q, want a reset then %s", bad, got, changeOf(live))
			}
			w3.Close()
		}

		// past the window: the sweeper trims the logs
		f.clock.Add(2 * time.Minute) // every entry so far is older than the window now
		if err := f.sweeper(sweep.Options{}).Tick(ctx); err != nil {
			t.Fatal(err)
		}
		w4, err := h2.WatchTenant(ctx, domain.WatchParams{Call: domain.Call{Tenant: "acme"}, LastEventID: pos})
		if err != nil {
			t.Fatal(err)
		}
		defer w4.Close()
		live := createLabelled(t, f.s, "acme", "export", "")
		got, _ = collect(t, w4, 2, 10*time.Second)
		if got[0] != "reset" || got[1] != changeOf(live) {
			t.Fatalf("resume past the window: got %q, want a reset then %s", got, changeOf(live))
		}
	})
}

// A position the log no longer holds whole resets: past wait.replay_entries
// (the sweeper trims the log to that length), or from before a time the
// tenant was not watched (nothing was logged then).
func TestWatchResetsWhenTheLogCannotReplay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) { o.ReplayWindow = time.Minute; o.ChangeLogEntries = 3 })
		h := newHub(t, f.s)
		w, err := h.WatchTenant(ctx, domain.WatchParams{Call: domain.Call{Tenant: "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		createLabelled(t, f.s, "acme", "export", "")
		_, pos := collect(t, w, 1, 10*time.Second)
		w.Close()
		resume := func(what string) {
			t.Helper()
			w, err := h.WatchTenant(ctx, domain.WatchParams{Call: domain.Call{Tenant: "acme"}, LastEventID: pos})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			live := createLabelled(t, f.s, "acme", "export", "")
			got, last := collect(t, w, 2, 10*time.Second)
			if got[0] != "reset" || got[1] != changeOf(live) {
				t.Fatalf("%s: got %q, want a reset then %s", what, got, changeOf(live))
			}
			pos = last
		}
		// within the length, nothing trimmed: replayed
		sweep := func() {
			if err := f.sweeper(sweep.Options{}).Tick(ctx); err != nil {
				t.Fatal(err)
			}
		}
		r := createLabelled(t, f.s, "acme", "export", "")
		sweep()
		w2, err := h.WatchTenant(ctx, domain.WatchParams{Call: domain.Call{Tenant: "acme"}, LastEventID: pos})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := collect(t, w2, 1, 10*time.Second); got[0] != changeOf(r) {
			t.Fatalf("within the bounds: %q, want %s", got, changeOf(r))
		}
		w2.Close()
		// past the length
		for range 4 * f.shards {
			createLabelled(t, f.s, "acme", "export", "")
		}
		sweep()
		resume("past wait.replay_entries")
		// the log off: every watch gone for longer than it keeps logging
		f.clock.Add(2 * time.Minute)
		createLabelled(t, f.s, "acme", "export", "") // not logged
		resume("after the log was off")
	})
}
