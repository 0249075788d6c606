package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// TestWebhooksResealCommand rotates webhooks.secret_key: endpoints registered
// under the old key keep working while it is listed in
// webhooks.previous_secret_keys, `webhooks reseal` moves their secrets to the
// new key (a dry run and a second run change nothing), and after it the new
// key alone opens every secret, each the same secret as before.
func TestWebhooksResealCommand(t *testing.T) {
	ctx := context.Background()
	addr, prefix := testenv.Redis(t), testenv.Isolate(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	st, err := store.New(rdb, store.Options{Prefix: prefix, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	oldKey, newKey := strings.Repeat("o", 32), strings.Repeat("n", 32)
	oldSealer, _ := webhook.NewSealer([]byte(oldKey))
	secrets := map[string]string{} // tenant/id -> secret
	register := func(sealer *webhook.Sealer, tenant, id string) {
		t.Helper()
		secret, _ := webhook.NewSecret()
		sealed, err := sealer.Seal(tenant, id, secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SaveWebhook(ctx, domain.Call{Tenant: tenant}, domain.Webhook{ID: id, URL: "https://partner.example/" + id,
			Events: domain.DefaultWebhookEvents, SealedSecret: sealed}, 20); err != nil {
			t.Fatal(err)
		}
		secrets[tenant+"/"+id] = secret
	}
	for _, id := range []string{"ep_1", "ep_2", "ep_3"} {
		register(oldSealer, "acme", id)
	}
	register(oldSealer, "globex", "ep_1")
	sealedNow := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for k := range secrets {
			tenant, id, _ := strings.Cut(k, "/")
			w, err := st.Webhook(ctx, domain.Call{Tenant: tenant}, id)
			if err != nil {
				t.Fatal(err)
			}
			out[k] = w.SealedSecret
		}
		return out
	}
	before := sealedNow()

	env := map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://" + addr + "/0", "ASYNCSTATUS_REDIS_KEY_PREFIX": prefix,
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY": newKey, "ASYNCSTATUS_WEBHOOKS_PREVIOUS_SECRET_KEYS": "p" + strings.Repeat("x", 31) + "," + oldKey}

	// serve's sealer, during the rotation, opens what the old key sealed.
	cfg, err := config.Load("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	rotating, err := webhookSealer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotating.Open("acme", "ep_2", before["acme/ep_2"]); err != nil || got != secrets["acme/ep_2"] {
		t.Fatalf("serve's sealer during the rotation: %q %v", got, err)
	}

	out, _, err := runCmd(t, env, "webhooks", "reseal", "--dry-run")
	if err != nil || !strings.Contains(out, "dry run, nothing changed") || !strings.Contains(out, "2 tenant(s)") ||
		!strings.Contains(out, "4 endpoints seen, 4 resealed, 0 already under the current key") {
		t.Fatalf("dry run: %v %q", err, out)
	}
	if got := sealedNow(); !equalMaps(got, before) {
		t.Fatal("the dry run changed sealed secrets")
	}

	out, errOut, err := runCmd(t, env, "webhooks", "reseal", "--tenant", "globex")
	if err != nil || !strings.Contains(out, "1 tenant(s)") || !strings.Contains(out, "1 endpoints seen, 1 resealed") {
		t.Fatalf("reseal of globex: %v %q\n%s", err, out, errOut)
	}
	if got := sealedNow(); got["globex/ep_1"] == before["globex/ep_1"] || got["acme/ep_1"] != before["acme/ep_1"] {
		t.Fatal("--tenant globex did not reseal exactly globex's endpoint")
	}
	out, errOut, err = runCmd(t, env, "webhooks", "reseal")
	if err != nil || !strings.Contains(out, "2 tenant(s)") ||
		!strings.Contains(out, "4 endpoints seen, 3 resealed, 1 already under the current key, 0 deleted or changed meanwhile, 0 unreadable") {
		t.Fatalf("reseal: %v %q\n%s", err, out, errOut)
	}
	if !strings.Contains(errOut, "2 previous key(s) configured") {
		t.Fatalf("progress %q", errOut)
	}
	after := sealedNow()
	newOnly, _ := webhook.NewSealer([]byte(newKey))
	for k, secret := range secrets {
		tenant, id, _ := strings.Cut(k, "/")
		if got, err := newOnly.Open(tenant, id, after[k]); err != nil || got != secret {
			t.Errorf("%s under the new key alone: %q %v", k, got, err)
		}
		if _, err := oldSealer.Open(tenant, id, after[k]); err == nil {
			t.Errorf("%s still opens under the old key", k)
		}
	}
	if w, _ := st.Webhook(ctx, domain.Call{Tenant: "acme"}, "ep_3"); w.URL != "https://partner.example/ep_3" || len(w.Events) != len(domain.DefaultWebhookEvents) {
		t.Fatalf("reseal changed more than the secret: %+v", w)
	}
	out, _, err = runCmd(t, env, "webhooks", "reseal")
	if err != nil || !strings.Contains(out, "4 endpoints seen, 0 resealed, 4 already under the current key") || !equalMaps(sealedNow(), after) {
		t.Fatalf("second reseal: %v %q", err, out)
	}

	// A secret sealed under a key nobody kept is reported, and the run fails.
	lost, _ := webhook.NewSealer([]byte(strings.Repeat("l", 32)))
	register(lost, "acme", "ep_lost")
	out, errOut, err = runCmd(t, env, "webhooks", "reseal")
	if err == nil || !strings.Contains(err.Error(), "1 endpoint secret(s) open under no configured key") ||
		!strings.Contains(errOut, "tenant acme endpoint ep_lost") || !strings.Contains(out, "5 endpoints seen, 0 resealed, 4 already under the current key, 0 deleted or changed meanwhile, 1 unreadable") {
		t.Fatalf("unreadable secret: %v %q\n%s", err, out, errOut)
	}
}

// TestWebhookSealerRefusesBadPreviousKeys: a short previous key, or previous
// keys without a current one, stop the program naming the key.
func TestWebhookSealerRefusesBadPreviousKeys(t *testing.T) {
	for name, tc := range map[string]struct {
		current  string
		previous []string
		want     string
	}{
		"short":      {strings.Repeat("n", 32), []string{strings.Repeat("o", 32), "short"}, "webhooks.previous_secret_keys: key 2 of 2 must be at least 32 bytes"},
		"no current": {"", []string{strings.Repeat("o", 32)}, "webhooks.previous_secret_keys: set only with webhooks.secret_key"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Webhooks.SecretKey, cfg.Webhooks.PreviousSecretKeys = tc.current, tc.previous
			if _, err := webhookSealer(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
