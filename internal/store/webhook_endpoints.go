package store

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Webhooks, the Redis way (spec §10; docs/webhooks.md).
//
// Endpoints live in a hash per endpoint and, for the scripts, in one filter hash
// per tenant (endpoint id -> event letters). create.lua and transition.lua read
// the filter hash and append one entry per interested endpoint to the tenant's
// outbox stream in the same script as the write, so no transition is applied
// without its message. Dispatchers (internal/webhook) read the outbox through
// the consumer group "dispatch" (XREADGROUP), take over entries whose reader
// died (XAUTOCLAIM), and settle each attempt with one script: delivered or
// finally failed entries are deleted (XDEL), failed ones wait in a retry zset
// whose score is the due time, and while a replica sends a retry the score is
// that replica's lease. Every key is under the tenant's hash tag; the only
// global key is the registry of tenants with endpoints, written with single-key
// commands. Nothing here spans two slots.

// eventLetter is the one-letter code of an event in filters and outbox entries:
// the status the request enters (q for created).
func eventLetter(e domain.WebhookEvent) string {
	if e == domain.EventCreated {
		return "q"
	}
	return statusCode[domain.Status(strings.TrimPrefix(string(e), "request."))]
}

func letterEvent(l string) domain.WebhookEvent {
	if s, ok := codeStatus[l]; ok {
		return domain.EventFor(s)
	}
	return ""
}

func eventLetters(evs []domain.WebhookEvent) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(eventLetter(e))
	}
	return b.String()
}

// SaveWebhook registers an endpoint; w.SealedSecret must already be sealed. A
// tenant may have at most max endpoints (VALIDATION_FAILED beyond).
func (s *Store) SaveWebhook(ctx context.Context, tenant string, w domain.Webhook, max int) error {
	// The registry first, so that no endpoint ever exists that dispatchers cannot
	// find; and again after, in case a dispatcher pruned the tenant in between
	// (PruneWebhookTenant re-checks after its SREM; this closes the other order).
	if err := s.sadd(ctx, s.k.webhookTenants(), tenant); err != nil {
		return backend("register webhook", err)
	}
	r, err := s.run(ctx, s.sc.webhookRegister, []string{s.k.webhook(tenant, w.ID), s.k.webhookFilter(tagOf(tenant)), s.k.meta(tagOf(tenant))},
		w.ID, eventLetters(w.Events), max,
		"u", w.URL, "ev", eventLetters(w.Events), "d", w.Description, "ca", ms(w.CreatedAt.Time), "k", w.SealedSecret)
	if err != nil {
		return backend("register webhook", err)
	}
	if r.code != codeOK {
		return s.scriptError("register webhook", w.ID, r.code, []any{int64(max)})
	}
	err = s.sadd(ctx, s.k.webhookTenants(), tenant)
	if err == nil {
		err = s.copyFilter(ctx, tenant, w.ID, eventLetters(w.Events))
	}
	if err != nil {
		// Undo rather than leave an endpoint no dispatcher may find (or that
		// some shards do not emit to): the caller sees a 503 and may simply
		// register again.
		_ = s.DeleteWebhook(context.WithoutCancel(ctx), tenant, w.ID)
		return backend("register webhook", err)
	}
	return nil
}

// copyFilter writes endpoint id's filter entry and the wh flag into the other
// shards of tenant (1..S-1), whose create and transition scripts read their
// own shard's copies; the registry, the endpoint and the limit stay in shard
// 0 (webhook_register.lua). One pipeline; SaveWebhook answers after it, so
// every change after the answer emits, whichever shard its request is in.
func (s *Store) copyFilter(ctx context.Context, tenant, id, letters string) error {
	tags := s.tenantTags(tenant)[1:]
	if len(tags) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, tag := range tags {
			p.HSet(ctx, s.k.webhookFilter(tag), id, letters)
			p.HSet(ctx, s.k.meta(tag), "wh", "1")
		}
		return nil
	})
	return err
}

func (s *Store) sadd(ctx context.Context, key, member string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	return s.rdb.SAdd(ctx, key, member).Err()
}

// decodeWebhook reads an endpoint hash; nil when it is empty (no such endpoint).
func decodeWebhook(id string, m map[string]string) *domain.Webhook {
	if len(m) == 0 || m["u"] == "" {
		return nil
	}
	w := &domain.Webhook{ID: id, URL: m["u"], Description: m["d"], CreatedAt: domain.TimeMs(atoi(m["ca"])), SealedSecret: m["k"]}
	for _, l := range m["ev"] {
		if e := letterEvent(string(l)); e != "" {
			w.Events = append(w.Events, e)
		}
	}
	return w
}

// Webhook reads one endpoint of tenant; NOT_FOUND when it has no such endpoint.
func (s *Store) Webhook(ctx context.Context, tenant, id string) (*domain.Webhook, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	m, err := s.rdb.HGetAll(ctx, s.k.webhook(tenant, id)).Result()
	if err != nil {
		return nil, backend("read webhook", err)
	}
	w := decodeWebhook(id, m)
	if w == nil {
		return nil, errWebhookNotFound()
	}
	return w, nil
}

// ReplaceWebhookSecret stores resealed as the sealed secret of tenant's endpoint
// id if it still holds sealed, the form it was read with (webhooks reseal). It
// reports false, and changes nothing, when the endpoint is gone or holds
// another secret.
func (s *Store) ReplaceWebhookSecret(ctx context.Context, tenant, id, sealed, resealed string) (bool, error) {
	r, err := s.run(ctx, s.sc.webhookReseal, []string{s.k.webhook(tenant, id)}, sealed, resealed)
	if err != nil {
		return false, backend("reseal webhook secret", err)
	}
	return r.code == codeOK, nil
}

func errWebhookNotFound() error {
	// The same words as for requests: nothing tells unknown and foreign apart.
	return domain.ErrNotFound()
}

// Webhooks lists a tenant's endpoints, oldest first.
func (s *Store) Webhooks(ctx context.Context, tenant string) ([]domain.Webhook, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	ids, err := s.rdb.HKeys(ctx, s.k.webhookFilter(tagOf(tenant))).Result()
	if err != nil {
		return nil, backend("list webhooks", err)
	}
	out := make([]domain.Webhook, 0, len(ids))
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), pipelineChunk)]
		ids = ids[len(chunk):]
		cmds := make([]*redis.MapStringStringCmd, len(chunk))
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range chunk {
				cmds[i] = p.HGetAll(ctx, s.k.webhook(tenant, id))
			}
			return nil
		}); err != nil {
			return nil, backend("list webhooks", err)
		}
		for i, c := range cmds {
			if w := decodeWebhook(chunk[i], c.Val()); w != nil {
				out = append(out, *w)
			}
		}
	}
	sortWebhooks(out)
	return out, nil
}

func sortWebhooks(ws []domain.Webhook) {
	sort.Slice(ws, func(i, j int) bool {
		if !ws[i].CreatedAt.Equal(ws[j].CreatedAt.Time) {
			return ws[i].CreatedAt.Before(ws[j].CreatedAt.Time)
		}
		return ws[i].ID < ws[j].ID
	})
}

// DeleteWebhook removes an endpoint and its delivery log. Its messages still in
// the outbox are dropped when a dispatcher meets them.
func (s *Store) DeleteWebhook(ctx context.Context, tenant, id string) error {
	r, err := s.run(ctx, s.sc.webhookDelete, []string{s.k.webhook(tenant, id), s.k.webhookFilter(tagOf(tenant)), s.k.webhookLog(tagOf(tenant), id), s.k.meta(tagOf(tenant))}, id)
	if err != nil {
		return backend("delete webhook", err)
	}
	// The other shards' copies and logs, with the same script on each shard's
	// keys (no endpoint hash there: it deletes nothing).
	for _, tag := range s.tenantTags(tenant)[1:] {
		if _, err := s.run(ctx, s.sc.webhookDelete, []string{s.k.webhook(shardName(tag), id), s.k.webhookFilter(tag), s.k.webhookLog(tag, id), s.k.meta(tag)}, id); err != nil {
			return backend("delete webhook", err)
		}
	}
	if r.code == codeOK {
		return nil
	}
	return s.scriptError("delete webhook", id, r.code, r.rest)
}

// WebhookDeliveries lists an endpoint's most recent delivery attempts, newest first.
func (s *Store) WebhookDeliveries(ctx context.Context, tenant, id string) ([]domain.WebhookDelivery, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	// Each shard's dispatch logs in its own slot (webhook_settle.lua): read
	// them all and keep the newest webhookLogCap.
	var exists *redis.IntCmd
	tags := s.tenantTags(tenant)
	logs := make([]*redis.StringSliceCmd, len(tags))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, s.k.webhook(tenant, id))
		for i, tag := range tags {
			logs[i] = p.LRange(ctx, s.k.webhookLog(tag, id), 0, webhookLogCap-1)
		}
		return nil
	}); err != nil {
		return nil, backend("list webhook deliveries", err)
	}
	if exists.Val() == 0 {
		return nil, errWebhookNotFound()
	}
	var out []domain.WebhookDelivery
	for _, log := range logs {
		for _, v := range log.Val() {
			var d domain.WebhookDelivery
			if json.Unmarshal([]byte(v), &d) == nil {
				out = append(out, d)
			}
		}
	}
	if len(tags) > 1 {
		sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At.Time) })
		out = out[:min(len(out), webhookLogCap)]
	}
	if out == nil {
		out = []domain.WebhookDelivery{}
	}
	return out, nil
}
