package store

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
)

// Webhooks, the Redis way (docs/reference.md §10; docs/webhooks.md).
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
		return statusCode[domain.StatusQueued]
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

// SaveWebhook registers an endpoint of c.Tenant; w.SealedSecret must already
// be sealed. A tenant may have at most max endpoints (VALIDATION_FAILED
// beyond). c.Credential, when set, is counted against the admin rate limits in
// the same script, and c.Rate receives the counted limit; a refused call
// registers nothing.
func (s *Store) SaveWebhook(ctx context.Context, c domain.Call, w domain.Webhook, max int) error {
	tenant := c.Tenant
	// The registry first, so that no endpoint ever exists that dispatchers cannot
	// find; and again after, in case a dispatcher pruned the tenant in between
	// (PruneWebhookTenant re-checks after its SREM; this closes the other order).
	if err := s.sadd(ctx, s.k.webhookTenants(), tenant); err != nil {
		return backend("register webhook", err)
	}
	a := registerArgs{tenant: tenant, w: w, max: max, now: ms(s.now()),
		rate: s.counters(ownTag(tenant), ratelimit.ScopeAdmin, c.Credential)}
	r, err := s.run(ctx, s.sc.webhookRegister, a.call(s.k))
	if err != nil {
		return backend("register webhook", err)
	}
	setRate(c.Rate, r)
	if err := s.outcome("register webhook", w.ID, r, codeOK); err != nil {
		return err
	}
	err = s.sadd(ctx, s.k.webhookTenants(), tenant)
	if err == nil {
		err = s.copyFilter(ctx, tenant, w.ID, eventLetters(w.Events))
	}
	if err != nil {
		// Undo rather than leave an endpoint no dispatcher may find (or that
		// some shards do not emit to): the caller sees a 503 and may simply
		// register again.
		_ = s.DeleteWebhook(context.WithoutCancel(ctx), domain.Call{Tenant: tenant}, w.ID)
		return backend("register webhook", err)
	}
	return nil
}

// registerArgs is what a registration asks of webhook_register.lua.
type registerArgs struct {
	tenant string
	w      domain.Webhook
	max    int
	now    string
	rate   counters
}

// call is webhook_register.lua's KEYS and ARGV, in its header's order.
func (a registerArgs) call(k keys) scriptCall {
	tag, w, letters := ownTag(a.tenant), a.w, eventLetters(a.w.Events)
	keys := a.rate.appendTo([]string{k.webhook(a.tenant, w.ID), k.webhookFilter(tag), k.meta(tag)})
	return scriptCall{keys: keys, args: []any{w.ID, letters, a.max, a.now,
		"u", w.URL, "ev", letters, "d", w.Description, "ca", ms(w.CreatedAt.Time), "k", w.SealedSecret}}
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

// Webhook reads one endpoint of c.Tenant; NOT_FOUND when it has no such
// endpoint. c.Credential is counted as by countedReads.
func (s *Store) Webhook(ctx context.Context, c domain.Call, id string) (*domain.Webhook, error) {
	var m *redis.MapStringStringCmd
	if err := s.countedReads(ctx, "read webhook", c, func(p redis.Pipeliner) {
		m = p.HGetAll(ctx, s.k.webhook(c.Tenant, id))
	}); err != nil {
		return nil, err
	}
	w := decodeWebhook(id, m.Val())
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
	r, err := s.run(ctx, s.sc.webhookReseal, scriptCall{keys: []string{s.k.webhook(tenant, id)}, args: []any{sealed, resealed}})
	if err != nil {
		return false, backend("reseal webhook secret", err)
	}
	return r.code == codeOK, nil
}

func errWebhookNotFound() error {
	// The same words as for requests: nothing tells unknown and foreign apart.
	return domain.ErrNotFound()
}

// Webhooks lists c.Tenant's endpoints, oldest first. c.Credential is counted
// as by countedReads, with the first read.
func (s *Store) Webhooks(ctx context.Context, c domain.Call) ([]domain.Webhook, error) {
	tenant := c.Tenant
	var keys *redis.StringSliceCmd
	if err := s.countedReads(ctx, "list webhooks", c, func(p redis.Pipeliner) {
		keys = p.HKeys(ctx, s.k.webhookFilter(ownTag(tenant)))
	}); err != nil {
		return nil, err
	}
	ids := keys.Val()
	cmds, err := eachPipelined(ctx, s, ids, func(ctx context.Context, p redis.Pipeliner, id string) *redis.MapStringStringCmd {
		return p.HGetAll(ctx, s.k.webhook(tenant, id))
	})
	if err != nil {
		return nil, backend("list webhooks", err)
	}
	out := make([]domain.Webhook, 0, len(ids))
	for i, c := range cmds {
		if w := decodeWebhook(ids[i], c.Val()); w != nil {
			out = append(out, *w)
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

// DeleteWebhook removes an endpoint of c.Tenant and its delivery log. Its
// messages still in the outbox are dropped when a dispatcher meets them.
// c.Credential, when set, is counted against the admin rate limits by the
// first script (shard 0's), and c.Rate receives the counted limit; a refused
// call removes nothing.
func (s *Store) DeleteWebhook(ctx context.Context, c domain.Call, id string) error {
	tags := s.tenantTags(c.Tenant)
	now := ms(s.now())
	r, err := s.run(ctx, s.sc.webhookDelete, webhookDeleteCall(s.k, tags[0], id, now,
		s.counters(tags[0], ratelimit.ScopeAdmin, c.Credential)))
	if err != nil {
		return backend("delete webhook", err)
	}
	setRate(c.Rate, r)
	if r.code == codeRateLimited {
		return s.outcome("delete webhook", id, r)
	}
	// The other shards' copies and logs, with the same script on each shard's
	// keys (no endpoint hash there: it deletes nothing).
	for _, tag := range tags[1:] {
		if _, err := s.run(ctx, s.sc.webhookDelete, webhookDeleteCall(s.k, tag, id, now, counters{})); err != nil {
			return backend("delete webhook", err)
		}
	}
	return s.outcome("delete webhook", id, r, codeOK)
}

// webhookDeleteCall is webhook_delete.lua's KEYS and ARGV, in its header's
// order, for endpoint id's keys under hash tag tag.
func webhookDeleteCall(k keys, tag, id, now string, rate counters) scriptCall {
	keys := rate.appendTo([]string{k.webhook(string(shardName(tag)), id), k.webhookFilter(tag), k.webhookLog(tag, id), k.meta(tag)})
	return scriptCall{keys: keys, args: []any{id, now}}
}

// WebhookDeliveries lists the most recent delivery attempts of an endpoint of
// c.Tenant, newest first. c.Credential is counted as by countedReads.
func (s *Store) WebhookDeliveries(ctx context.Context, c domain.Call, id string) ([]domain.WebhookDelivery, error) {
	// Each shard's dispatch logs in its own slot (webhook_settle.lua): read
	// them all and keep the newest webhookLogCap.
	var exists *redis.IntCmd
	tags := s.tenantTags(c.Tenant)
	logs := make([]*redis.StringSliceCmd, len(tags))
	if err := s.countedReads(ctx, "list webhook deliveries", c, func(p redis.Pipeliner) {
		exists = p.Exists(ctx, s.k.webhook(c.Tenant, id))
		for i, tag := range tags {
			logs[i] = p.LRange(ctx, s.k.webhookLog(tag, id), 0, webhookLogCap-1)
		}
	}); err != nil {
		return nil, err
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

// countedReads sends the reads that queue adds to a pipeline and, when c is
// counted (a credential, and the scripts count the admin scope), rate.lua
// ahead of them in the same pipeline: the count costs no round trip of its
// own, and cannot pass while the read fails. A refused call answers
// RATE_LIMITED, its reads discarded (they change nothing); c.Rate receives the
// counted limit. op names the operation in errors.
func (s *Store) countedReads(ctx context.Context, op string, c domain.Call, queue func(redis.Pipeliner)) error {
	rate := s.counters(ownTag(c.Tenant), ratelimit.ScopeAdmin, c.Credential)
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	var count *redis.Cmd
	send := func(eval bool) error {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			if rate.cred != "" {
				keys, now := rate.appendTo(nil), ms(s.now())
				if eval { // Redis lost the script: EVAL also caches it again
					count = s.sc.rate.Eval(ctx, p, keys, now)
				} else {
					count = s.sc.rate.EvalSha(ctx, p, keys, now)
				}
			}
			queue(p)
			return nil
		})
		return err
	}
	start := time.Now()
	err := send(false)
	if err != nil && count != nil && redis.HasErrorPrefix(count.Err(), "NOSCRIPT") {
		err = send(true)
	}
	if count == nil {
		if err != nil {
			return backend(op, err)
		}
		return nil
	}
	if o := s.opts.ScriptObserver; o != nil {
		o.ObserveScript(s.sc.rate.name, time.Since(start), count.Err())
	}
	if err != nil {
		return backend(op, err)
	}
	r, err := decodeReply(count.Val())
	if err != nil {
		return backend(op, err)
	}
	setRate(c.Rate, r)
	return s.outcome(op, "", r, codeOK)
}
