package webhook_test

import (
	"context"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestShardedTenantDelivered: with a tenant's requests spread over 4 shards
// (redis.tenant_shards), every shard's outbox is dispatched: each message is
// delivered, retried with one webhook-id, settled in its own shard, and the
// endpoint's deliveries merge every shard's log, newest first.
func TestShardedTenantDelivered(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		f := newFixtureWith(t, b.Client(t), store.Options{Prefix: testenv.Isolate(t), OpTimeout: 5 * time.Second,
			Retention: time.Hour, TenantShards: 4})
		rcv := newReceiver(t, func(n int, _ string) int {
			if n == 1 {
				return 503 // every message once: the retries run in each shard
			}
			return 200
		})
		w := f.register("acme", rcv.url())
		rcv.setSecret(w.Secret)
		f.startDispatcher(nil)
		const n = 12
		for range n {
			f.complete("acme", f.create("acme"))
		}
		rcv.waitFor("every message delivered", 15*time.Second, func(g []received) bool {
			ok := 0
			for _, c := range countIDs(g) {
				if c >= 2 {
					ok++
				}
			}
			return ok == n
		})
		names, err := f.st.WebhookTenants(context.Background())
		if err != nil || len(names) != 4 {
			t.Fatalf("webhook tenants %+v %v", names, err)
		}
		waitUntil(t, "every shard's outbox to empty", func() bool {
			for _, wt := range names {
				if f.outboxLen(string(wt.Name)) != 0 || f.retriesLen(string(wt.Name)) != 0 {
					return false
				}
			}
			return true
		})
		time.Sleep(300 * time.Millisecond)
		got := rcv.all()
		for id, c := range countIDs(got) {
			if c != 2 {
				t.Errorf("message %s: %d attempts, want 2", id, c)
			}
		}
		for _, g := range got {
			if g.verifyErr != nil {
				t.Fatalf("signature: %v", g.verifyErr)
			}
		}
		ds := f.deliveries("acme", w.ID)
		if len(ds) != 2*n {
			t.Fatalf("%d deliveries listed, want %d", len(ds), 2*n)
		}
		delivered := 0
		for i, d := range ds {
			if i > 0 && d.At.After(ds[i-1].At.Time) {
				t.Fatalf("deliveries not newest first at %d", i)
			}
			if d.State == domain.DeliveryDelivered {
				delivered++
			}
		}
		if delivered != n {
			t.Fatalf("%d delivered, want %d", delivered, n)
		}
		// the endpoint gone, no shard keeps a copy of it
		if err := f.svc.DeleteWebhook(context.Background(), domain.Call{Tenant: "acme"}, w.ID); err != nil {
			t.Fatal(err)
		}
		for _, wt := range names {
			if n, _ := f.rdb.HLen(context.Background(), f.prefix+":{"+string(wt.Name)+"}:whm").Result(); n != 0 {
				t.Fatalf("shard %s still has the endpoint", wt.Name)
			}
		}
	})
}
