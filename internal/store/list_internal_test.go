package store

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestHydratePathsAgree: the pipeline (Redis) and records.lua (embedded store)
// read a page alike: pacing state and events left out, gone records nil.
func TestHydratePathsAgree(t *testing.T) {
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
		r, _, err := s.Create(ctx, domain.CreateParams{Tenant: "acme", CreatedBy: "key_a", Input: domain.CreateInput{Type: typ, Context: json.RawMessage(`{"a":1}`)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	tp := func(id string) domain.TransitionParams {
		return domain.TransitionParams{Tenant: "acme", ID: id, By: "key_w"}
	}
	if _, err := s.MarkProcessing(ctx, tp(ids[0]), domain.ProgressInput{Progress: json.RawMessage(`{"percent":5}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Poll(ctx, domain.PollParams{Tenant: "acme", ID: ids[0], Caller: "key_p"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[1:3] {
		if _, err := s.Complete(ctx, tp(id), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"v":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Minute)                            // ids[2] is past its retention
	ids = append(ids, "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a") // never existed

	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.k.record("acme", id)
	}
	byScript, err := s.hydrateScript(ctx, ids, keys)
	if err != nil {
		t.Fatal(err)
	}
	byPipeline, err := s.hydrate(ctx, "acme", ids)
	if err != nil || s.readPath.Load() != readPipeline {
		t.Fatalf("pipeline path on Redis: %v (path %d)", err, s.readPath.Load())
	}
	for i := range ids {
		a, _ := json.Marshal(byScript[i])
		b, _ := json.Marshal(byPipeline[i])
		if string(a) != string(b) {
			t.Fatalf("record %d:\nscript   %s\npipeline %s", i, a, b)
		}
		if gone := i == 2 || i == 4; gone != (byScript[i] == nil) || (!gone && (byScript[i].Events != nil || byScript[i].Context == nil)) {
			t.Fatalf("record %d: %+v", i, byScript[i])
		}
	}
	if string(byScript[0].Progress) != `{"percent":5}` {
		t.Fatalf("progress %s", byScript[0].Progress)
	}

	// A page on Redis: the list script, then one pipeline (once the script is
	// loaded: the first call finds it missing and sends it).
	if _, err := s.List(ctx, "acme", domain.ListFilter{}); err != nil {
		t.Fatal(err)
	}
	c := &roundTrips{}
	rdb.AddHook(c)
	page, err := s.List(ctx, "acme", domain.ListFilter{})
	if err != nil || len(page.Items) != 3 || c.n != 2 {
		t.Fatalf("list: %v, %d items, %d round trips", err, len(page.Items), c.n)
	}
}

// roundTrips is a go-redis hook counting round trips: a command sent alone or a
// pipeline.
type roundTrips struct{ n int }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n++; return next(ctx, cmd) }
}
func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n++; return next(ctx, cmds) }
}

// TestReadPathOnMiniredis: the embedded store gets records.lua, and a page of
// 200 records reads without deadlocking its in-memory connection.
func TestReadPathOnMiniredis(t *testing.T) {
	ctx := context.Background()
	m := testenv.Miniredis(t)
	rdb := redis.NewClient(&redis.Options{Dialer: func(context.Context, string, string) (net.Conn, error) { return m.Dial() }, DisableIdentity: true})
	defer rdb.Close()
	s, err := New(rdb, Options{Prefix: "as", OpTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range domain.MaxListLimit {
		if _, _, err := s.Create(ctx, domain.CreateParams{Tenant: "a-long-tenant-name-for-long-record-keys", Input: domain.CreateInput{Type: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.List(ctx, "a-long-tenant-name-for-long-record-keys", domain.ListFilter{Limit: domain.MaxListLimit})
	if err != nil || len(p.Items) != domain.MaxListLimit || s.readPath.Load() != readScript {
		t.Fatalf("list on miniredis: %v, %d items, path %d", err, len(p.Items), s.readPath.Load())
	}
}
