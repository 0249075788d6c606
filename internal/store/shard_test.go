package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// forEachShardedBackend runs f on every backend with suiteShards shards.
func forEachShardedBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		b.Shards = suiteShards
		t.Run(b.Name, func(t *testing.T) { f(t, b) })
	}
}

// On the local Cluster one tenant's requests land on every master, with 4
// shards (more than the 3 masters) and with 16.
func TestShardedTenantSpreadsOverEveryMaster(t *testing.T) {
	cluster := testenv.Backends()[2]
	for _, n := range []int{suiteShards, 16} {
		t.Run(fmt.Sprintf("S%d", n), func(t *testing.T) {
			f := newFixture(t, backend{cluster, n}, nil)
			cc := f.rdb.(*redis.ClusterClient)
			masters := map[string]int{}
			var all []string
			var mu sync.Mutex
			_ = cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
				mu.Lock() // called for the masters concurrently
				defer mu.Unlock()
				all = append(all, c.Options().Addr)
				return nil
			})
			for range 20 * n {
				r := f.mustCreate(t, "acme", "x")
				m, err := cc.MasterForKey(ctx, f.key("acme", r.ID, ":r:"+r.ID))
				if err != nil {
					t.Fatal(err)
				}
				masters[m.Options().Addr]++
				// and it is readable, through its shard
				if got := f.mustGet(t, "acme", r.ID); got.ID != r.ID {
					t.Fatalf("read back %+v", got)
				}
			}
			if len(all) != 3 || len(masters) != len(all) {
				t.Fatalf("records of one tenant on %d masters (%v), want all %d", len(masters), masters, len(all))
			}
			// and the tags themselves: every master owns at least one shard
			owners := map[string]bool{}
			for _, tag := range store.TenantTags(f.s, "acme") {
				m, err := cc.MasterForKey(ctx, f.prefix+":"+tag+":m")
				if err != nil {
					t.Fatal(err)
				}
				owners[m.Options().Addr] = true
			}
			if len(owners) != 3 {
				t.Fatalf("the %d shards of one tenant sit on %d masters", n, len(owners))
			}
		})
	}
}

// Requests created without an Idempotency-Key take an even share of every
// master even where the shards do not divide among the masters: with 4 shards
// on 3 masters, one master holds two of them and would take half of the
// requests if shards were drawn evenly; a third is wanted. Elsewhere (one
// server) every shard takes an even share. Keyed creates keep their key's
// shard (TestIdempotentCreate: racing creates with one key meet).
func TestUnkeyedCreatesSpreadEvenlyOverMasters(t *testing.T) {
	forEachShardedBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		const n = 900
		byShard := map[int]int{}
		for range n {
			byShard[store.ShardOf(f.mustCreate(t, "acme", "x").ID)]++
		}
		cc, cluster := f.rdb.(*redis.ClusterClient)
		if !cluster {
			for sh := range f.shards {
				// n/S = 225 each, standard deviation 13: 4.5 of them either way
				if c := byShard[sh]; c < 165 || c > 285 {
					t.Fatalf("shard %d took %d of %d creates (%v), want about %d", sh, c, n, byShard, n/f.shards)
				}
			}
			return
		}
		byMaster := map[string]int{}
		shardsOn := map[string]int{}
		for sh, tag := range store.TenantTags(f.s, "acme") {
			m, err := cc.MasterForKey(ctx, f.prefix+":"+tag+":m")
			if err != nil {
				t.Fatal(err)
			}
			byMaster[m.Options().Addr] += byShard[sh]
			shardsOn[m.Options().Addr]++
		}
		if len(byMaster) != 3 {
			t.Fatalf("shards on %d masters (%v), want 3", len(byMaster), shardsOn)
		}
		for addr, c := range byMaster {
			// n/3 = 300 each, standard deviation 14: 4.3 of them either way (a
			// master of 2 shards of 4 drawn shard by shard would take 450)
			if c < 240 || c > 360 {
				t.Fatalf("master %s (%d shards) took %d of %d creates (%v), want about %d", addr, shardsOn[addr], c, n, byMaster, n/3)
			}
		}
	})
}

// A poll of a request in any shard is one command in one round trip: the id
// names its shard.
func TestShardedPollIsOneRoundTrip(t *testing.T) {
	forEachShardedBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		seen := map[int]bool{}
		for len(seen) < suiteShards {
			r := f.mustCreate(t, "acme", "x")
			sh := store.ShardOf(r.ID)
			if seen[sh] {
				continue
			}
			seen[sh] = true
			c := &testenv.RoundTrips{}
			f.rdb.AddHook(c)
			if _, _, err := pollOf(f.s, "acme", r.ID, "key_a"); err != nil {
				t.Fatal(err)
			}
			if n, m := c.Trips.Load(), c.Cmds.Load(); n != 1 || m != 1 {
				t.Fatalf("poll in shard %d: %d round trips, %d commands; want 1 and 1", sh, n, m)
			}
			// a complete too
			trips, cmds := c.Trips.Load(), c.Cmds.Load()
			if _, err := f.s.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if n, m := c.Trips.Load()-trips, c.Cmds.Load()-cmds; n != 1 || m != 1 {
				t.Fatalf("complete in shard %d: %d round trips, %d commands; want 1 and 1", sh, n, m)
			}
		}
	})
}

// A freeze is in force in every shard when SetFrozen returns.
func TestShardedFreeze(t *testing.T) {
	forEachShardedBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		var ids []string
		for range 4 * suiteShards {
			ids = append(ids, f.mustCreate(t, "acme", "x").ID)
		}
		if err := f.s.SetFrozen(ctx, "acme", true); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			_, _, err := pollOf(f.s, "acme", id, "")
			wantCode(t, err, domain.TenantFrozen)
		}
		for range 2 * suiteShards {
			_, _, err := f.s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "acme", By: "key_a"}, Input: domain.CreateInput{Type: "x"}})
			wantCode(t, err, domain.TenantFrozen)
		}
		_, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}})
		wantCode(t, err, domain.TenantFrozen)
		if fz, err := f.s.Frozen(ctx, "acme"); err != nil || !fz {
			t.Fatalf("frozen %v %v", fz, err)
		}
		if err := f.s.SetFrozen(ctx, "acme", false); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			f.mustGet(t, "acme", id)
		}
	})
}

// The upgrade: data written by the layout before shards (one tag, {tenant})
// is read, listed, transitioned, deleted and swept by a store with S > 1,
// next to requests it creates itself; so is an older id whose random bits
// name another shard only by chance (its record is in shard 0).
func TestShardUpgrade(t *testing.T) {
	forEachShardedBackend(t, func(t *testing.T, b backend) {
		// today's layout: one shard
		old := newFixture(t, backend{b.Backend, 1}, func(o *store.Options) { o.QueuedTimeout = time.Hour })
		f := old
		var legacy []string
		for i := range 12 {
			r := old.mustCreate(t, "acme", "x")
			legacy = append(legacy, r.ID)
			if i%3 == 1 {
				old.moveTo(t, "acme", r.ID, domain.StatusSucceeded)
			}
		}
		// an older id that names shard 2 by chance: the same record under that id
		chance := store.Remark(legacy[0], 2)
		for _, k := range []string{":r:"} {
			if err := f.rdb.Rename(ctx, f.prefix+":{acme}"+k+legacy[0], f.prefix+":{acme}"+k+chance).Err(); err != nil {
				t.Fatal(err)
			}
		}
		ix := f.prefix + ":{acme}:ix:q:x"
		score := f.rdb.ZScore(ctx, ix, legacy[0]).Val()
		f.rdb.ZRem(ctx, ix, legacy[0])
		f.rdb.ZAdd(ctx, ix, redis.Z{Score: score, Member: chance})
		legacy[0] = chance
		if store.ShardOf(chance) != 2 {
			t.Fatalf("%s names shard %d", chance, store.ShardOf(chance))
		}

		// the new code, on the same keys
		s, err := store.New(old.rdb, store.Options{Prefix: old.prefix, TenantShards: b.Shards, OpTimeout: 5 * time.Second,
			Retention: time.Hour, Now: old.clock.Now, QueuedTimeout: time.Hour, RetentionBucket: 100 * time.Millisecond,
			AutoPipeline: b.AutoPipeline})
		if err != nil {
			t.Fatal(err)
		}
		nf := &fixture{s: s, rdb: old.rdb, clock: old.clock, prefix: old.prefix, shards: b.Shards}
		var fresh []string
		for range 12 {
			fresh = append(fresh, nf.mustCreate(t, "acme", "x").ID)
		}
		for _, id := range append(slices.Clone(legacy), fresh...) {
			if got := nf.mustGet(t, "acme", id); got.ID != id {
				t.Fatalf("read %s: %+v", id, got)
			}
		}
		// listed together, newest first, every one once
		want := append(slices.Clone(fresh), legacy...)
		slices.Sort(want)
		slices.Reverse(want)
		for _, limit := range []int{5, 50} {
			got, _ := nf.listAll(t, "acme", domain.ListFilter{Limit: limit})
			if !slices.Equal(got, want) {
				t.Fatalf("limit %d: listed\n%v\nwant\n%v", limit, got, want)
			}
		}
		// transitioned, with a waiter woken, and deleted
		h := newHub(t, s)
		w, err := h.Watch(ctx, "acme", chance)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := nf.s.MarkProcessing(ctx, tp("acme", chance), domain.ProgressInput{}); err != nil {
			t.Fatal(err)
		}
		// its record is in shard 0, its waiters listen on the tag it names
		if snap := nextChange(t, w, 1, 5*time.Second); snap.Err != nil || snap.Request.Status != domain.StatusProcessing {
			t.Fatalf("the waiter of an id that names another shard: %+v", snap)
		}
		if _, err := nf.s.Cancel(ctx, tp("acme", legacy[3]), domain.CancelInput{}); err != nil {
			t.Fatal(err)
		}
		if err := nf.s.Delete(ctx, "acme", legacy[2]); err != nil {
			t.Fatal(err)
		}
		_, _, err = pollOf(nf.s, "acme", legacy[2], "")
		wantCode(t, err, domain.NotFound)
		// swept: the old queued ones expire, the old terminal ones leave their index
		nf.clock.Add(2 * time.Hour)
		st := mustTick(t, nf.sweeper(sweep.Options{}))
		// still queued: legacy 5, 6, 8, 9 and 11 (0 is processing, 1, 4, 7 and
		// 10 succeeded, 2 deleted, 3 cancelled) and the 12 fresh ones
		if st.Expired != 17 || st.Failed != 1 {
			t.Fatalf("sweep: %+v", st)
		}
		for _, id := range []string{legacy[5], fresh[0]} {
			if got := nf.mustGet(t, "acme", id); got.Status != domain.StatusExpired {
				t.Fatalf("%s after the sweep: %+v", id, got)
			}
		}
		nf.clock.Add(2 * time.Hour) // every terminal one is past its retention
		st = mustTick(t, nf.sweeper(sweep.Options{}))
		if p, err := nf.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}}); err != nil || len(p.Items) != 0 {
			t.Fatalf("after retention: %d listed, %v", len(p.Items), err)
		}
		if n := nf.sumCard(t, "acme", ":ix:s:x") + nf.sumCard(t, "acme", ":ix:e:x"); n != 0 {
			t.Fatalf("%d index entries outlived retention (%+v)", n, st)
		}
	})
}

// A walk through every page of a sharded listing while writers create,
// transition, expire (queued timeout) and delete: no id twice, newest first,
// and every request that existed before the walk and was not deleted is
// listed.
func TestShardedCursorWalkUnderWriters(t *testing.T) {
	forEachShardedBackend(t, func(t *testing.T, b backend) {
		f := listFixture(t, b, nil) // queued timeout 1ms, the clock a minute ahead
		var before []string
		for range 120 {
			before = append(before, f.mustCreate(t, "acme", "x").ID)
		}
		deleted := map[string]bool{}
		var mu sync.Mutex
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := f.s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "acme", By: "key_a"}, Input: domain.CreateInput{Type: "x"}}); err != nil {
					done <- err
					return
				}
				id := before[(i*7)%len(before)]
				var err error
				switch i % 4 {
				case 0:
					_, err = f.s.MarkProcessing(ctx, tp("acme", id), domain.ProgressInput{})
				case 1:
					_, err = f.s.Complete(ctx, tp("acme", id), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)})
				case 3:
					_, err = f.s.ExpireQueued(ctx, "acme", id)
				case 2:
					if i%12 == 2 {
						mu.Lock()
						deleted[id] = true
						mu.Unlock()
						err = f.s.Delete(ctx, "acme", id)
					}
				}
				if c := domain.ErrorCode(err); err != nil && c != domain.AlreadyTerminal && c != domain.NotFound {
					done <- err
					return
				}
			}
		}()
		seen := map[string]bool{}
		var order []string
		flt := domain.ListFilter{Limit: 7}
		for {
			p, err := f.s.List(ctx, inTenant("acme", flt))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Items {
				if seen[r.ID] {
					t.Fatalf("%s listed twice", r.ID)
				}
				seen[r.ID] = true
				order = append(order, r.ID)
			}
			if p.NextCursor == "" {
				break
			}
			flt.Cursor = p.NextCursor
		}
		close(stop)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(order, func(a, b string) int { return strings.Compare(b, a) }) {
			t.Fatal("the walk is not newest first")
		}
		for _, id := range before {
			if !seen[id] && !deleted[id] {
				t.Fatalf("survivor %s was skipped", id)
			}
		}
	})
}

// With one shard every key is spelled as before shards existed: the tenant's
// tag {T}, nothing else (the bench's bytes per request do not move), plus the
// index-head summaries, per shard (written at S = 1 too, so that a rolling
// restart that raises S finds them kept by every replica).
func TestOneShardSpellsKeysAsBefore(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.Name, func(t *testing.T) {
			f := newFixture(t, b, nil)
			r := f.mustCreate(t, "acme", "x")
			if _, _, err := pollOf(f.s, "acme", r.ID, "key_p"); err != nil {
				t.Fatal(err)
			}
			if _, err := f.s.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{}); err != nil {
				t.Fatal(err)
			}
			q := f.mustCreate(t, "acme", "x")
			if _, err := f.s.Complete(ctx, tp("acme", q.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{
				":{acme}:r:" + r.ID: true, ":{acme}:r:" + q.ID: true, ":{acme}:pc:" + r.ID: true,
				":{acme}:ix:p:x": true, ":{acme}:ix:s:x": true, ":{acme}:dl": true, ":{acme}:m": true, ":{acme}:rbi": true,
				":{acme}:ixh:q": true, ":{acme}:ixh:p": true, ":{acme}:ixh:s": true,
			}
			keys := f.tenantKeys(t, "acme")
			for _, k := range keys {
				rest := strings.TrimPrefix(k, f.prefix)
				if strings.HasPrefix(rest, ":{acme}:rb:") {
					continue // the retention bucket of q's expires_at
				}
				if !want[rest] {
					t.Fatalf("key %s is not one the layout before shards had", k)
				}
				delete(want, rest)
			}
			if len(want) != 0 {
				t.Fatalf("keys missing: %v (have %v)", want, keys)
			}
		})
	}
}

// Raising S later moves nothing: requests made with S = 4 are read, listed,
// transitioned and swept by a store with S = 8, next to its own.
func TestRaisingShards(t *testing.T) {
	forEachShardedBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, func(o *store.Options) { o.QueuedTimeout = time.Hour })
		var ids []string
		for range 16 {
			ids = append(ids, f.mustCreate(t, "acme", "x").ID)
		}
		s, err := store.New(f.rdb, store.Options{Prefix: f.prefix, TenantShards: 2 * b.Shards, OpTimeout: 5 * time.Second,
			Retention: time.Hour, Now: f.clock.Now, QueuedTimeout: time.Hour, RetentionBucket: 100 * time.Millisecond,
			AutoPipeline: b.AutoPipeline})
		if err != nil {
			t.Fatal(err)
		}
		nf := &fixture{s: s, rdb: f.rdb, clock: f.clock, prefix: f.prefix, shards: 2 * b.Shards}
		beyond := 0
		for range 32 {
			id := nf.mustCreate(t, "acme", "x").ID
			ids = append(ids, id)
			if store.ShardOf(id) >= b.Shards {
				beyond++
			}
		}
		if beyond == 0 {
			t.Fatal("no request went to the new shards")
		}
		for _, id := range ids {
			nf.mustGet(t, "acme", id)
		}
		want := slices.Clone(ids)
		slices.Sort(want)
		slices.Reverse(want)
		if got, _ := nf.listAll(t, "acme", domain.ListFilter{Limit: 7}); !slices.Equal(got, want) {
			t.Fatalf("listed %d, want %d", len(got), len(want))
		}
		if _, err := nf.s.Complete(ctx, tp("acme", ids[0]), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		nf.clock.Add(2 * time.Hour)
		if st := mustTick(t, nf.sweeper(sweep.Options{})); st.Expired != int64(len(ids)-1) {
			t.Fatalf("sweep: %+v, want %d expired", st, len(ids)-1)
		}
	})
}
