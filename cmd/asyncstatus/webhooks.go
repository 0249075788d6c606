package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// minWebhookSecretKey is the shortest accepted webhooks.secret_key: 256 bits.
const minWebhookSecretKey = config.MinSecretKey

// webhookSealer is the encryption of endpoint secrets at rest: under
// webhooks.secret_key, which every replica must share and which must survive
// restarts, so it is required with a real Redis; the embedded store, which
// lives and dies with one process, uses a random key. Secrets sealed under one
// of webhooks.previous_secret_keys still open. nil when webhooks are off.
func webhookSealer(cfg config.Config) (*webhook.Sealer, error) {
	w := cfg.Webhooks
	switch {
	case !w.Enabled:
		return nil, nil
	case w.SecretKey != "":
		if len(w.SecretKey) < minWebhookSecretKey {
			return nil, fmt.Errorf("webhooks.secret_key: must be at least %d bytes (set %s)", minWebhookSecretKey, config.EnvName("webhooks.secret_key"))
		}
		previous := make([][]byte, len(w.PreviousSecretKeys))
		for i, k := range w.PreviousSecretKeys {
			if len(k) < minWebhookSecretKey {
				return nil, fmt.Errorf("webhooks.previous_secret_keys: key %d of %d must be at least %d bytes (set %s)",
					i+1, len(w.PreviousSecretKeys), minWebhookSecretKey, config.EnvName("webhooks.previous_secret_keys"))
			}
			previous[i] = []byte(k)
		}
		return webhook.NewSealer([]byte(w.SecretKey), previous...)
	case len(w.PreviousSecretKeys) > 0:
		return nil, fmt.Errorf("webhooks.previous_secret_keys: set only with webhooks.secret_key, the key secrets are sealed under now (set %s)",
			config.EnvName("webhooks.secret_key"))
	case !cfg.Embedded():
		return nil, fmt.Errorf("webhooks.secret_key: required when Redis is configured and webhooks.enabled is true "+
			"(set %s to at least %d random bytes, or set webhooks.enabled to false)", config.EnvName("webhooks.secret_key"), minWebhookSecretKey)
	}
	return webhook.RandomSealer()
}

// webhookOptions are the options of this replica's webhook dispatcher (every
// replica runs one); nil with webhooks off. tr, when set, traces deliveries.
func webhookOptions(cfg config.Config, sealer *webhook.Sealer, log *slog.Logger, tr webhook.Tracer) *webhook.DispatcherOptions {
	if !cfg.Webhooks.Enabled || sealer == nil {
		return nil
	}
	w := cfg.Webhooks
	if w.AllowHTTP || w.AllowPrivate {
		log.Warn("webhooks may reach http:// or internal addresses (webhooks.allow_http / webhooks.allow_private): for development and tests only",
			"allow_http", w.AllowHTTP, "allow_private", w.AllowPrivate)
	}
	guard := &webhook.Guard{AllowHTTP: w.AllowHTTP, AllowPrivate: w.AllowPrivate}
	return &webhook.DispatcherOptions{Timeout: w.Timeout, RetrySchedule: w.RetrySchedule, Guard: guard, Sealer: sealer, Log: log, Tracer: tr}
}

// cmdWebhooks runs `asyncstatus webhooks reseal [--tenant T] [--dry-run]`: it
// seals every endpoint secret that opens under one of
// webhooks.previous_secret_keys again under webhooks.secret_key, so that the
// old key can then be removed. Progress goes to stderr, the summary to stdout;
// it fails when some secret opens under no configured key.
func cmdWebhooks(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	_, args, err := group("webhooks", args, "reseal")
	if err != nil {
		return err
	}
	tenant, dry, cfgPath, err := tenantRunFlags("webhooks reseal", "every tenant with endpoints", args, stderr)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(cfgPath, getenv)
	if err != nil {
		return err
	}
	if !cfg.Webhooks.Enabled {
		return fmt.Errorf("webhooks reseal: webhooks.enabled is false")
	}
	if cfg.Webhooks.SecretKey == "" {
		return fmt.Errorf("webhooks reseal: webhooks.secret_key is not set: it is the key the secrets are to be sealed under (set %s)",
			config.EnvName("webhooks.secret_key"))
	}
	sealer, err := webhookSealer(cfg)
	if err != nil {
		return err
	}
	b, err := adminBackend("webhooks reseal", cfgPath, getenv, !dry, stderr)
	if err != nil {
		return err
	}
	defer b.Close()

	tenants := []string{tenant}
	if tenant == "" {
		ts, err := b.store.WebhookTenants(ctx)
		if err != nil {
			return fmt.Errorf("webhooks reseal: %w", err)
		}
		tenants = tenants[:0]
		for _, t := range ts {
			if !slices.Contains(tenants, t.Tenant) { // once, not once per shard
				tenants = append(tenants, t.Tenant)
			}
		}
	}
	verb := "resealing"
	if dry {
		verb = "dry run, nothing is changed: counting"
	}
	fmt.Fprintf(stderr, "reseal: %s the endpoint secrets of %d tenant(s) under webhooks.secret_key (%d previous key(s) configured)\n",
		verb, len(tenants), len(cfg.Webhooks.PreviousSecretKeys))
	start := time.Now()
	var c resealCounts
	for _, t := range tenants {
		if err := resealTenant(ctx, b.store, sealer, t, dry, &c, stderr); err != nil {
			fmt.Fprintf(stderr, "reseal: stopped at tenant %s after %s; running it again is safe\n", t, c)
			return fmt.Errorf("webhooks reseal: %w", err)
		}
	}
	done := "endpoint secrets resealed"
	if dry {
		done = "dry run, nothing changed; endpoint secrets would be resealed"
	}
	fmt.Fprintf(stdout, "%s in %d tenant(s) in %s: %s\n", done, len(tenants), time.Since(start).Round(time.Millisecond), c)
	if c.unreadable > 0 {
		return fmt.Errorf("webhooks reseal: %d endpoint secret(s) open under no configured key (listed above): "+
			"their deliveries fail until the endpoints are registered again", c.unreadable)
	}
	return nil
}

// resealCounts sums up a reseal.
type resealCounts struct{ seen, resealed, current, gone, unreadable int }

func (c resealCounts) String() string {
	return fmt.Sprintf("%d endpoints seen, %d resealed, %d already under the current key, %d deleted or changed meanwhile, %d unreadable",
		c.seen, c.resealed, c.current, c.gone, c.unreadable)
}

// resealTenant reseals one tenant's endpoints. Each replacement is a
// compare-and-set on the sealed form read, so an endpoint deleted or
// registered again meanwhile is left as it is.
func resealTenant(ctx context.Context, st *store.Store, sealer *webhook.Sealer, tenant string, dry bool, c *resealCounts, stderr io.Writer) error {
	eps, err := st.Webhooks(ctx, domain.Call{Tenant: tenant})
	if err != nil {
		return err
	}
	for _, ep := range eps {
		c.seen++
		again, changed, err := sealer.Reseal(tenant, ep.ID, ep.SealedSecret)
		switch {
		case err != nil:
			c.unreadable++
			fmt.Fprintf(stderr, "reseal: tenant %s endpoint %s: %v\n", tenant, ep.ID, err)
		case !changed:
			c.current++
		case dry:
			c.resealed++
		default:
			ok, err := st.ReplaceWebhookSecret(ctx, tenant, ep.ID, ep.SealedSecret, again)
			if err != nil {
				return err
			}
			if ok {
				c.resealed++
			} else {
				c.gone++
			}
		}
	}
	return nil
}
