package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/memconn"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestHydrate: a page's records come from one MGET, without events; gone records
// (deleted, past retention, never made) are nil.
func TestHydrate(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	defer rdb.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	s, err := New(rdb, Options{Prefix: testenv.Isolate(t), Retention: time.Hour, Now: clock,
		RetentionByType: map[string]time.Duration{"short": time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, typ := range []string{"x", "x", "short", "x"} {
		r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "acme", By: "key_a"}, Input: domain.CreateInput{Type: typ, Context: json.RawMessage(`{"a":1}`)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	tp := func(id string) domain.TransitionParams {
		return domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_w"}, ID: id}
	}
	if _, err := s.MarkProcessing(ctx, tp(ids[0]), domain.ProgressInput{Progress: json.RawMessage(`{"percent":5}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: "acme"}, ID: ids[0], Caller: "key_p"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[1:3] {
		if _, err := s.Complete(ctx, tp(id), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"v":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Minute)                            // ids[2] is past its retention
	ids = append(ids, "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a") // never existed

	var at []listed
	for _, id := range ids {
		at = append(at, listed{id: id, shard: shardOf(id)})
	}
	got, err := s.hydrate(ctx, "acme", at, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		if gone := i == 2 || i == 4; gone != (got[i] == nil) || (!gone && (got[i].Events != nil || got[i].Context == nil || got[i].ID != ids[i])) {
			t.Fatalf("record %d: %+v", i, got[i])
		}
	}
	if got[1].Status != domain.StatusSucceeded || string(got[1].Result) != `{"v":1}` || got[1].Version != 2 {
		t.Fatalf("completed record: %+v", got[1])
	}
	if string(got[0].Progress) != `{"percent":5}` {
		t.Fatalf("progress %s", got[0].Progress)
	}

	// A page: the list script, then one MGET (once the script is loaded: the
	// first call finds it missing and sends it).
	if _, err := s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}}); err != nil {
		t.Fatal(err)
	}
	c := &testenv.RoundTrips{}
	rdb.AddHook(c)
	page, err := s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}})
	if err != nil || len(page.Items) != 3 || c.Trips.Load() != 2 {
		t.Fatalf("list: %v, %d items, %d round trips", err, len(page.Items), c.Trips.Load())
	}
}

// TestLongPageOnMiniredis: on the embedded store a page of 200 records reads
// without deadlocking its in-memory connection (one MGET is one command; a
// pipeline larger than its 4 KiB read buffer would block).
func TestLongPageOnMiniredis(t *testing.T) {
	ctx := context.Background()
	m := testenv.Miniredis(t)
	rdb := redis.NewClient(&redis.Options{Dialer: memconn.Dialer(m.Dial), DisableIdentity: true})
	defer rdb.Close()
	s, err := New(rdb, Options{Prefix: "as", OpTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range domain.MaxListLimit {
		if _, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "a-long-tenant-name-for-long-record-keys"}, Input: domain.CreateInput{Type: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "a-long-tenant-name-for-long-record-keys"}, Limit: domain.MaxListLimit})
	if err != nil || len(p.Items) != domain.MaxListLimit {
		t.Fatalf("list on miniredis: %v, %d items", err, len(p.Items))
	}
}
