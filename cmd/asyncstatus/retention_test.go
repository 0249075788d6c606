package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestRetentionReapplyCommand(t *testing.T) {
	ctx := context.Background()
	addr := testenv.Redis(t)
	prefix := testenv.Isolate(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	// Records finished under a 1h retention...
	old, err := store.New(rdb, store.Options{Prefix: prefix, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var acme []string
	for i := range 1100 {
		tenant := "acme"
		if i%100 == 99 {
			tenant = "globex"
		}
		r, _, err := old.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: tenant}, Input: domain.CreateInput{Type: "x"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.Cancel(ctx, domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: "key_t"}, ID: r.ID}, domain.CancelInput{}); err != nil {
			t.Fatal(err)
		}
		if tenant == "acme" {
			acme = append(acme, r.ID)
		}
	}
	expiresAt := func(tenant, id string) string {
		evs, err := old.Events(ctx, tenant, id) // proves it is visible
		if err != nil || len(evs) != 2 {
			t.Fatalf("%s: %v", id, err)
		}
		res, err := old.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: tenant}, ID: id})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if res.Request.ExpiresAt == nil {
			return ""
		}
		return res.Request.ExpiresAt.String()
	}

	// ...then ops keep acme's forever.
	env := map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://" + addr + "/0", "ASYNCSTATUS_REDIS_KEY_PREFIX": prefix,
		"ASYNCSTATUS_RETENTION_TERMINAL": "0"}
	out, _, err := runCmd(t, env, "retention", "reapply", "--tenant", "acme", "--dry-run")
	if err != nil || !strings.Contains(out, "dry run, nothing changed") || !strings.Contains(out, "1089 updated") || expiresAt("acme", acme[0]) == "" {
		t.Fatalf("dry run: %v %q", err, out)
	}
	out, errOut, err := runCmd(t, env, "retention", "reapply", "--tenant", "acme")
	if err != nil {
		t.Fatalf("reapply: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "1 tenant(s)") || !strings.Contains(out, "1089 records seen, 1089 updated, 0 deleted") {
		t.Fatalf("summary %q", out)
	}
	if !strings.Contains(errOut, "retention.terminal=forever") || !strings.Contains(errOut, "reapply: at tenant acme (1 so far): 1") {
		t.Fatalf("progress %q", errOut)
	}
	if ex := expiresAt("acme", acme[0]); ex != "" || rdb.PTTL(ctx, prefix+":{acme}:r:"+acme[0]).Val() != -1 {
		t.Fatalf("acme record still expires: %q", ex)
	}
	if ex := expiresAt("globex", globexID(t, rdb, prefix)); ex == "" {
		t.Fatal("--tenant acme changed globex")
	}

	// Every tenant, 2h by default.
	env["ASYNCSTATUS_RETENTION_TERMINAL"] = "2h"
	out, _, err = runCmd(t, env, "retention", "reapply")
	if err != nil || !strings.Contains(out, "2 tenant(s)") || !strings.Contains(out, "1100 records seen, 1100 updated") {
		t.Fatalf("all tenants: %v %q", err, out)
	}
	rec, _ := old.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: "acme"}, ID: acme[0]})
	if r := rec.Request; r == nil || r.ExpiresAt == nil || r.ExpiresAt.Sub(r.CompletedAt.Time) != 2*time.Hour {
		b, _ := json.Marshal(r)
		t.Fatalf("acme record: %s", b)
	}

	for _, args := range [][]string{{"retention"}, {"retention", "apply"}, {"retention", "reapply", "--tenant", "Bad{tag}"}, {"retention", "reapply", "extra"}} {
		if _, _, err := runCmd(t, env, args...); err == nil || exitCode(err) != 2 {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

func globexID(t *testing.T, rdb *redis.Client, prefix string) string {
	ids, err := rdb.ZRange(context.Background(), prefix+":{globex}:ix:c:x", 0, 0).Result()
	if err != nil || len(ids) == 0 {
		t.Fatalf("globex: %v", err)
	}
	return ids[0]
}

// TestServeSweeps: serve runs the sweeper; a queued request times out by itself.
func TestServeSweeps(t *testing.T) {
	env := map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://" + testenv.Redis(t) + "/0", "ASYNCSTATUS_REDIS_KEY_PREFIX": testenv.Isolate(t),
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET":   strings.Repeat("s", 32),
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY":      strings.Repeat("w", 32),
		"ASYNCSTATUS_LIFECYCLE_QUEUED_TIMEOUT": "300ms", "ASYNCSTATUS_LIFECYCLE_SWEEP_INTERVAL": "100ms",
		"ASYNCSTATUS_RATELIMIT_ENABLED": "false"}
	out, _, err := runCmd(t, env, "keys", "create", "--tenant", "acme", "--scopes", "read,write")
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(out)
	base, _, stop := serving(t, env)
	code, created, _ := do(t, "POST", base+"/v1/requests", key, `{"type":"x"}`)
	if code != 202 {
		t.Fatalf("create: %d", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, page, _ := do(t, "GET", base+"/v1/requests?status=expired", key, "")
		if code == 200 && len(page["items"].([]any)) == 1 {
			item := page["items"].([]any)[0].(map[string]any)
			if item["id"] != created["id"] || item["failure"].(map[string]any)["code"] != "REQUEST_EXPIRED" {
				t.Fatalf("expired item %v", item)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not expired by the sweeper: %d %v", code, page)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
}
