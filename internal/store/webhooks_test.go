package store_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
)

func (f *fixture) mustSaveWebhook(tb testing.TB, tenant, id string, evs ...domain.WebhookEvent) {
	tb.Helper()
	w := domain.Webhook{ID: id, URL: "https://partner.example/" + id, Events: evs, Description: "d " + id,
		CreatedAt: domain.TimeMs(f.clock.Now().UnixMilli()), SealedSecret: "v1.sealed-" + id}
	if err := f.s.SaveWebhook(ctx, domain.Call{Tenant: tenant}, w, 20); err != nil {
		tb.Fatal(err)
	}
}

// outbox lists the (endpoint, message id) of every outbox entry of tenant, in
// every shard.
func (f *fixture) outbox(tb testing.TB, tenant string) []string {
	tb.Helper()
	var out []string
	for _, tag := range store.TenantTags(f.s, tenant) {
		xs, err := f.rdb.XRange(ctx, f.prefix+":"+tag+":ob", "-", "+").Result()
		if err != nil {
			tb.Fatal(err)
		}
		for _, x := range xs {
			out = append(out, fmt.Sprint(x.Values["_ep"], " ", x.Values["_id"]))
		}
	}
	sort.Strings(out)
	return out
}

// outboxWant asks ReadOutbox for n messages of each of tenant's shards (as the
// dispatcher names them: WebhookTenants).
func (f *fixture) outboxWant(tenant string, n int) map[domain.ShardName]int {
	want := map[domain.ShardName]int{}
	for _, name := range f.auditNames(tenant) {
		want[name] = n
	}
	return want
}

// TestOutboxWrittenWithTransitions: create and every status change append one
// outbox entry per endpoint that asked for the event, in the same script;
// heartbeats, refused transitions and idempotent replays append nothing; a
// tenant without endpoints gets no outbox at all.
func TestOutboxWrittenWithTransitions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		quiet := f.mustCreate(t, "quiet", "t.a")
		if _, err := f.s.Complete(ctx, tp("quiet", quiet.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if got := f.outbox(t, "quiet"); len(got) != 0 {
			t.Fatal("a tenant without endpoints got an outbox")
		}

		f.mustSaveWebhook(t, "acme", "ep_all", domain.WebhookEvents[:]...)
		f.mustSaveWebhook(t, "acme", "ep_term", domain.DefaultWebhookEvents...)
		r := f.mustCreate(t, "acme", "t.a")
		id := r.ID
		for i := 0; i < 3; i++ { // start and two heartbeats
			if _, err := f.s.MarkProcessing(ctx, tp("acme", id), domain.ProgressInput{}); err != nil {
				t.Fatal(err)
			}
		}
		p := tp("acme", id)
		p.IdemKey = "k1"
		for i := 0; i < 2; i++ { // the second is a replay
			if _, err := f.s.Complete(ctx, p, domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"x":1}`)}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := f.s.Fail(ctx, tp("acme", id), domain.FailInput{Failure: domain.FailureJSON("ERR_X", "late")})
		wantCode(t, err, domain.AlreadyTerminal)

		want := []string{"ep_all msg_" + id + "_p", "ep_all msg_" + id + "_q", "ep_all msg_" + id + "_s", "ep_term msg_" + id + "_s"}
		if got := f.outbox(t, "acme"); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("outbox\n got %v\nwant %v", got, want)
		}
	})
}

// TestOutboxCarriesTheRepresentation: the dispatcher's view of a message is the
// representation at the moment of the transition, without pacing state.
func TestOutboxCarriesTheRepresentation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		f.mustSaveWebhook(t, "acme", "ep_1", domain.EventProcessing, domain.EventSucceeded)
		r := f.mustCreate(t, "acme", "t.a")
		f.clock.Add(10 * time.Second)
		if _, _, err := pollOf(f.s, "acme", r.ID, "key_r"); err != nil { // leaves pacing state in the record
			t.Fatal(err)
		}
		started, err := f.s.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{Progress: json.RawMessage(`{"percent":5}`)})
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Add(time.Second)
		done, err := f.s.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"n":7}`)})
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := f.s.ReadOutbox(ctx, "c1", f.outboxWant("acme", 10))
		if err != nil || len(msgs) != 2 {
			t.Fatalf("read %d: %v", len(msgs), err)
		}
		sort.Slice(msgs, func(i, j int) bool { return msgs[i].EntryID < msgs[j].EntryID })
		for i, want := range []*domain.Request{started, done} {
			m := msgs[i]
			want.Events = nil
			got, _ := json.Marshal(m.Request)
			w, _ := json.Marshal(want)
			if string(got) != string(w) {
				t.Errorf("message %d representation\n got %s\nwant %s", i, got, w)
			}
			if m.Event != domain.EventFor(want.Status) || !m.At.Equal(want.UpdatedAt.Time) || m.Attempt != 1 ||
				m.EndpointID != "ep_1" || m.Tenant != "acme" || m.ID != "msg_"+r.ID+"_"+map[domain.Status]string{domain.StatusProcessing: "p", domain.StatusSucceeded: "s"}[want.Status] {
				t.Errorf("message %d: %+v", i, m)
			}
		}
		// Nothing new for the group; the entries stay pending for c1.
		if again, err := f.s.ReadOutbox(ctx, "c2", f.outboxWant("acme", 10)); err != nil || len(again) != 0 {
			t.Fatalf("read again: %d %v", len(again), err)
		}
	})
}

// TestSweeperTimeoutsEmit: the sweeper's timeouts are transitions too.
func TestSweeperTimeoutsEmit(t *testing.T) {
	f := newFixture(t, backends()[0], func(o *store.Options) { o.QueuedTimeout = time.Minute })
	f.mustSaveWebhook(t, "acme", "ep_1", domain.EventExpired)
	r := f.mustCreate(t, "acme", "t.a")
	f.clock.Add(2 * time.Minute)
	if done, err := f.s.ExpireQueued(ctx, "acme", r.ID); err != nil || !done {
		t.Fatalf("expire: %v %v", done, err)
	}
	if got := f.outbox(t, "acme"); len(got) != 1 || got[0] != "ep_1 msg_"+r.ID+"_e" {
		t.Fatalf("outbox %v", got)
	}
}

// TestWebhookEndpoints: register, read, list, delete; tenants do not see each
// other's endpoints; a tenant has at most the allowed number.
func TestWebhookEndpoints(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		f.mustSaveWebhook(t, "acme", "ep_b", domain.EventCreated, domain.EventFailed)
		f.clock.Add(time.Millisecond)
		f.mustSaveWebhook(t, "acme", "ep_a", domain.DefaultWebhookEvents...)
		w, err := f.s.Webhook(ctx, domain.Call{Tenant: "acme"}, "ep_b")
		if err != nil || w.URL != "https://partner.example/ep_b" || len(w.Events) != 2 || w.Events[0] != domain.EventCreated ||
			w.Events[1] != domain.EventFailed || w.Description != "d ep_b" || w.SealedSecret != "v1.sealed-ep_b" {
			t.Fatalf("webhook %+v %v", w, err)
		}
		_, err = f.s.Webhook(ctx, domain.Call{Tenant: "globex"}, "ep_b")
		wantCode(t, err, domain.NotFound)
		ws, err := f.s.Webhooks(ctx, domain.Call{Tenant: "acme"})
		if err != nil || len(ws) != 2 || ws[0].ID != "ep_b" || ws[1].ID != "ep_a" {
			t.Fatalf("list %+v %v", ws, err)
		}
		if ws, _ := f.s.Webhooks(ctx, domain.Call{Tenant: "globex"}); len(ws) != 0 {
			t.Fatalf("globex sees %+v", ws)
		}
		wantCode(t, f.s.DeleteWebhook(ctx, domain.Call{Tenant: "globex"}, "ep_b"), domain.NotFound)
		if err := f.s.DeleteWebhook(ctx, domain.Call{Tenant: "acme"}, "ep_b"); err != nil {
			t.Fatal(err)
		}
		wantCode(t, f.s.DeleteWebhook(ctx, domain.Call{Tenant: "acme"}, "ep_b"), domain.NotFound)
		_, err = f.s.WebhookDeliveries(ctx, domain.Call{Tenant: "acme"}, "ep_b")
		wantCode(t, err, domain.NotFound)
		if ds, err := f.s.WebhookDeliveries(ctx, domain.Call{Tenant: "acme"}, "ep_a"); err != nil || len(ds) != 0 {
			t.Fatalf("deliveries %v %v", ds, err)
		}
		// one per shard of acme, each with its copy of the filter
		ts, err := f.s.WebhookTenants(ctx)
		names := f.auditNames("acme")
		if err != nil || len(ts) != len(names) || (f.shards == 1 && (len(ts) != 1 || ts[0].Name != "acme")) {
			t.Fatalf("tenants %+v %v", ts, err)
		}
		for _, wt := range ts {
			if !slices.Contains(names, wt.Name) || wt.Endpoints != 1 || wt.Frozen {
				t.Fatalf("tenants %+v", ts)
			}
		}
		for i := 1; i < 20; i++ {
			f.mustSaveWebhook(t, "acme", fmt.Sprintf("ep_%02d", i), domain.EventSucceeded)
		}
		err = f.s.SaveWebhook(ctx, domain.Call{Tenant: "acme"}, domain.Webhook{ID: "ep_x", URL: "https://x.example/", Events: domain.DefaultWebhookEvents}, 20)
		wantCode(t, err, domain.ValidationFailed)
	})
}

// TestReplaceWebhookSecret: the sealed secret is replaced only while the
// endpoint still holds the form it was read with; an endpoint deleted meanwhile
// is not brought back, and another tenant's endpoint of the same id is not
// touched.
func TestReplaceWebhookSecret(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		f.mustSaveWebhook(t, "acme", "ep_a", domain.DefaultWebhookEvents...)
		f.mustSaveWebhook(t, "globex", "ep_a", domain.DefaultWebhookEvents...)
		sealed := func(tenant string) string {
			t.Helper()
			w, err := f.s.Webhook(ctx, domain.Call{Tenant: tenant}, "ep_a")
			if err != nil {
				t.Fatal(err)
			}
			return w.SealedSecret
		}
		if ok, err := f.s.ReplaceWebhookSecret(ctx, "acme", "ep_a", "v1.not-what-it-holds", "v1.x"); err != nil || ok {
			t.Fatalf("replace of another sealed form: %v %v", ok, err)
		}
		if ok, err := f.s.ReplaceWebhookSecret(ctx, "acme", "ep_a", "v1.sealed-ep_a", "v1.resealed"); err != nil || !ok {
			t.Fatalf("replace: %v %v", ok, err)
		}
		if got := sealed("acme"); got != "v1.resealed" {
			t.Fatalf("acme's secret %q after the replace", got)
		}
		if got := sealed("globex"); got != "v1.sealed-ep_a" {
			t.Fatalf("globex's secret %q after acme's replace", got)
		}
		if w, _ := f.s.Webhook(ctx, domain.Call{Tenant: "acme"}, "ep_a"); w.URL != "https://partner.example/ep_a" || len(w.Events) != len(domain.DefaultWebhookEvents) {
			t.Fatalf("the replace changed more than the secret: %+v", w)
		}
		if err := f.s.DeleteWebhook(ctx, domain.Call{Tenant: "globex"}, "ep_a"); err != nil {
			t.Fatal(err)
		}
		if ok, err := f.s.ReplaceWebhookSecret(ctx, "globex", "ep_a", "v1.sealed-ep_a", "v1.resealed"); err != nil || ok {
			t.Fatalf("replace on a deleted endpoint: %v %v", ok, err)
		}
		if n, err := f.rdb.Exists(ctx, f.prefix+":{globex}:wh:ep_a").Result(); err != nil || n != 0 {
			t.Fatalf("the deleted endpoint's hash is back: %d %v", n, err)
		}
	})
}

// TestClaimStaleWalksThePendingList: a dead consumer's message behind many
// messages still in delivery elsewhere is found, though XAUTOCLAIM looks at no
// more than 10 x COUNT pending entries a call.
func TestClaimStaleWalksThePendingList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		f.mustSaveWebhook(t, "acme", "ep_1", domain.EventCreated)
		for i := 0; i < 31; i++ {
			f.mustCreateIn0(t, "acme", "t.a") // one stream: shard 0's
		}
		busy, err := f.s.ReadOutbox(ctx, "busy", map[domain.ShardName]int{"acme": 30})
		if err != nil || len(busy) != 30 {
			t.Fatalf("busy read %d %v", len(busy), err)
		}
		dead, err := f.s.ReadOutbox(ctx, "dead", map[domain.ShardName]int{"acme": 30})
		if err != nil || len(dead) != 1 {
			t.Fatalf("dead read %d %v", len(dead), err)
		}
		time.Sleep(150 * time.Millisecond)
		ids := make([]string, len(busy))
		for i, m := range busy {
			ids[i] = m.EntryID
		}
		// The busy consumer is alive: its entries were just delivered again.
		if err := f.rdb.XClaim(ctx, &redis.XClaimArgs{Stream: f.prefix + ":{acme}:ob", Group: "dispatch", Consumer: "busy", Messages: ids}).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := f.s.ClaimStaleOutbox(ctx, []domain.ShardName{"acme"}, "me", 100*time.Millisecond, 1)
		if err != nil || len(got) != 1 || got[0].EntryID != dead[0].EntryID || got[0].Attempt != 1 {
			t.Fatalf("claimed %+v %v, want %s", got, err, dead[0].EntryID)
		}
	})
}
