package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// The outbox side of webhooks (see webhook_endpoints.go for the design): the
// registry of tenants with endpoints, reading, claiming and settling messages.

const (
	// webhookGroup is the outbox consumer group every dispatcher joins.
	webhookGroup = "dispatch"
	// outboxCap bounds a tenant's outbox (XADD MAXLEN ~) as a guard. Entries
	// leave one by one when delivered or finally failed; the cap is reached only
	// when a tenant's receivers are unreachable for a long time with heavy
	// traffic, and then the oldest entries are lost (docs/webhooks.md).
	outboxCap = 100000
	// webhookLogCap is how many attempts an endpoint's delivery log keeps.
	webhookLogCap = 100
)

// outboxHook tells an in-process dispatcher that a tenant's outbox may have
// grown, so that it looks at once instead of at its next poll.
type outboxHook struct {
	f atomic.Pointer[func(domain.ShardName)]
}

func (h *outboxHook) written(tenant domain.ShardName) {
	if f := h.f.Load(); f != nil {
		(*f)(tenant)
	}
}

// OnOutbox sets f to be told the tenant of every applied create and transition
// (idempotent replays excluded), which may have queued webhook messages: the
// name of the tenant's shard whose outbox it is, as WebhookTenants names it. f must
// be quick and must not block: it runs on the request's path. nil removes it.
func (s *Store) OnOutbox(f func(domain.ShardName)) {
	if f == nil {
		s.outboxHook.f.Store(nil)
		return
	}
	s.outboxHook.f.Store(&f)
}

// WebhookTenants reads the registry of tenants with webhook endpoints. With
// tenant shards each shard has its own outbox, and is listed as a tenant of
// its own, by its name (shardName: "<tenant>:<n>"; the tenant's own name for
// shard 0): the dispatchers pass these names back to every outbox call, and
// the messages carry the tenant and the shard (WebhookMessage.Shard).
func (s *Store) WebhookTenants(ctx context.Context) ([]domain.WebhookTenant, error) {
	tenants, err := s.scanSet(ctx, s.k.webhookTenants(), "list webhook tenants")
	if err != nil {
		return nil, err
	}
	names := make([]domain.ShardName, 0, len(tenants)*s.opts.TenantShards)
	for _, t := range tenants {
		for _, tag := range s.tenantTags(t) {
			names = append(names, shardName(tag))
		}
	}
	out := make([]domain.WebhookTenant, 0, len(names))
	for len(names) > 0 {
		chunk := names[:min(len(names), pipelineBatch/2)]
		names = names[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		fz := make([]*redis.StringCmd, len(chunk))
		n := make([]*redis.IntCmd, len(chunk))
		_, err := s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, t := range chunk {
				fz[i] = p.HGet(cctx, s.k.meta(tagOf(t)), "fz")
				n[i] = p.HLen(cctx, s.k.webhookFilter(tagOf(t)))
			}
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, backend("list webhook tenants", err)
		}
		for i, t := range chunk {
			out = append(out, domain.WebhookTenant{Name: t, Tenant: tenantOf(t), Frozen: fz[i].Val() == "1", Endpoints: n[i].Val()})
		}
	}
	return out, nil
}

// PruneWebhookTenant removes a tenant without endpoints and without queued
// messages from the registry (and its empty outbox). It reports whether it did.
// Given the name of a shard other than 0 (WebhookTenants), it only removes
// that shard's empty outbox; given the tenant, it removes the tenant once
// every shard's outbox is empty.
func (s *Store) PruneWebhookTenant(ctx context.Context, name domain.ShardName) (bool, error) {
	prune := func(name domain.ShardName) (bool, error) {
		r, err := s.run(ctx, s.sc.webhookPrune, scriptCall{keys: []string{s.k.webhookFilter(tagOf(name)), s.k.outbox(tagOf(name)), s.k.webhookRetries(tagOf(name))}})
		if err != nil {
			return false, backend("prune webhook tenant", err)
		}
		return r.code == codeOK, nil
	}
	tenant := tenantOf(name)
	if tenant != string(name) {
		_, err := prune(name)
		return false, err
	}
	for _, tag := range s.tenantTags(tenant) {
		if ok, err := prune(shardName(tag)); err != nil || !ok {
			return false, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	if err := s.rdb.SRem(cctx, s.k.webhookTenants(), tenant).Err(); err != nil {
		return false, backend("prune webhook tenant", err)
	}
	// An endpoint registered since the script ran must keep its tenant listed
	// (SaveWebhook adds the tenant again after writing; this covers the order
	// where its second SADD came before our SREM).
	if n, err := s.rdb.HLen(cctx, s.k.webhookFilter(ownTag(tenant))).Result(); err != nil || n > 0 {
		if err2 := s.rdb.SAdd(cctx, s.k.webhookTenants(), tenant).Err(); err2 != nil {
			return false, backend("prune webhook tenant", err2)
		}
		return false, nil
	}
	return true, nil
}

// ReadOutbox reads new outbox messages for consumer (XREADGROUP ">"): at most
// want[t] of tenant t. The messages are pending on consumer until settled; if
// it dies, ClaimStaleOutbox lets another consumer take them over. A tenant's
// consumer group is created on first use.
func (s *Store) ReadOutbox(ctx context.Context, consumer string, want map[domain.ShardName]int) ([]domain.WebhookMessage, error) {
	tenants := make([]domain.ShardName, 0, len(want))
	for t, n := range want {
		if n > 0 {
			tenants = append(tenants, t)
		}
	}
	slices.Sort(tenants)
	got, err := s.readNew(ctx, "read webhook outbox", webhookGroup, consumer, tenants, func(t domain.ShardName) string { return s.k.outbox(tagOf(t)) },
		func(t domain.ShardName) int64 { return int64(want[t]) })
	var out []domain.WebhookMessage
	for _, t := range tenants {
		for _, m := range s.decodeEntries(ctx, t, got[t]) {
			m.Attempt = 1
			out = append(out, m)
		}
	}
	return out, err
}

// ClaimStaleOutbox takes over, for consumer, messages that another consumer read
// more than minIdle ago and never settled (it died mid-delivery): XAUTOCLAIM,
// at most count in all. XAUTOCLAIM looks at no more than 10 x COUNT pending
// entries a call, so a tenant whose pending list is longer (deliveries in flight
// on other replicas) is walked on with the cursor it returns, a few calls at most.
func (s *Store) ClaimStaleOutbox(ctx context.Context, tenants []domain.ShardName, consumer string, minIdle time.Duration, count int) ([]domain.WebhookMessage, error) {
	var out []domain.WebhookMessage
	var firstErr error
	note := func(err error) {
		if err != nil && !errors.Is(err, redis.Nil) && !strings.HasPrefix(err.Error(), "NOGROUP") && firstErr == nil {
			firstErr = backend("claim stale webhook messages", err)
		}
	}
	for len(tenants) > 0 && count > 0 {
		chunk := tenants[:min(len(tenants), pipelineBatch/2, count)]
		tenants = tenants[len(chunk):]
		each := count / len(chunk)
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		cmds := make([]*redis.XAutoClaimCmd, len(chunk))
		_, _ = s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, t := range chunk {
				cmds[i] = p.XAutoClaim(cctx, s.autoClaimArgs(t, consumer, minIdle, "0-0", each))
			}
			return nil
		})
		cancel()
		for i, c := range cmds {
			res, next, err := c.Result()
			note(err)
			got := s.claimed(ctx, chunk[i], res)
			out, count = append(out, got...), count-len(got)
			// Walk on while this tenant's pending list goes on and slots remain.
			for calls := 0; err == nil && next != "0-0" && next != "" && count > 0 && calls < 8; calls++ {
				cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
				res, next, err = s.rdb.XAutoClaim(cctx, s.autoClaimArgs(chunk[i], consumer, minIdle, next, count)).Result()
				cancel()
				note(err)
				got := s.claimed(ctx, chunk[i], res)
				out, count = append(out, got...), count-len(got)
			}
		}
	}
	return out, firstErr
}

func (s *Store) autoClaimArgs(tenant domain.ShardName, consumer string, minIdle time.Duration, start string, count int) *redis.XAutoClaimArgs {
	return &redis.XAutoClaimArgs{Stream: s.k.outbox(tagOf(tenant)), Group: webhookGroup, Consumer: consumer,
		MinIdle: minIdle, Start: start, Count: int64(count)}
}

// claimed decodes entries taken over from a dead consumer: their first attempt
// never finished.
func (s *Store) claimed(ctx context.Context, tenant domain.ShardName, xs []redis.XMessage) []domain.WebhookMessage {
	out := s.decodeEntries(ctx, tenant, xs)
	for i := range out {
		out[i].Attempt = 1
	}
	return out
}

// decodeEntries decodes outbox entries read through the group. An entry that
// does not decode (it cannot happen unless someone wrote to the outbox by hand)
// is acknowledged and deleted, so that it is not taken over again and again.
func (s *Store) decodeEntries(ctx context.Context, tenant domain.ShardName, xs []redis.XMessage) []domain.WebhookMessage {
	return decodeStream(ctx, s, s.k.outbox(tagOf(tenant)), webhookGroup, xs, func(x redis.XMessage) (domain.WebhookMessage, bool) {
		return decodeOutboxEntry(tenant, x)
	})
}

// ClaimWebhookRetries claims the retries due at now, at most count in all, each
// with a lease until leaseUntil: no other replica sends it before then.
func (s *Store) ClaimWebhookRetries(ctx context.Context, tenants []domain.ShardName, now, leaseUntil time.Time, count int) ([]domain.WebhookMessage, error) {
	// A cheap read first: most tenants have no retry due.
	cmds, err := eachPipelined(ctx, s, tenants, func(ctx context.Context, p redis.Pipeliner, t domain.ShardName) *redis.StringSliceCmd {
		return p.ZRangeByScore(ctx, s.k.webhookRetries(tagOf(t)), &redis.ZRangeBy{Min: "-inf", Max: ms(now), Count: 1})
	})
	if err != nil {
		return nil, backend("read webhook retries", err)
	}
	var due []domain.ShardName
	for i, c := range cmds {
		if len(c.Val()) > 0 {
			due = append(due, tenants[i])
		}
	}
	var out []domain.WebhookMessage
	for _, t := range due {
		if count <= 0 {
			break
		}
		r, err := s.run(ctx, s.sc.webhookClaim, scriptCall{keys: []string{s.k.webhookRetries(tagOf(t))}, args: []any{ms(now), ms(leaseUntil), count}})
		if err != nil {
			return out, backend("claim webhook retries", err)
		}
		members := make([]string, 0, len(r.rest))
		for _, v := range r.rest {
			if m, ok := v.(string); ok {
				members = append(members, m)
			}
		}
		msgs, err := s.retryMessages(ctx, t, members, leaseUntil.UnixMilli())
		if err != nil {
			return out, err
		}
		out = append(out, msgs...)
		count -= len(members)
	}
	return out, nil
}

// retryMessages reads the outbox entries of claimed retry members. A member
// whose entry is gone (delivered by a replica whose lease had run out, or
// trimmed) is dropped.
func (s *Store) retryMessages(ctx context.Context, tenant domain.ShardName, members []string, lease int64) ([]domain.WebhookMessage, error) {
	cmds, err := eachPipelined(ctx, s, members, func(ctx context.Context, p redis.Pipeliner, m string) *redis.XMessageSliceCmd {
		id, _, _ := strings.Cut(m, "|")
		return p.XRange(ctx, s.k.outbox(tagOf(tenant)), id, id)
	})
	if err != nil {
		return nil, backend("read webhook retries", err)
	}
	var out []domain.WebhookMessage
	var gone []any
	for i, c := range cmds {
		_, n, _ := strings.Cut(members[i], "|")
		made, _ := strconv.Atoi(n)
		var msg domain.WebhookMessage
		ok := len(c.Val()) == 1
		if ok {
			msg, ok = decodeOutboxEntry(tenant, c.Val()[0])
		}
		if !ok {
			gone = append(gone, members[i])
			continue
		}
		msg.Attempt, msg.Retry, msg.Lease = made+1, members[i], lease
		out = append(out, msg)
	}
	if len(gone) > 0 {
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		defer cancel()
		if err := s.rdb.ZRem(cctx, s.k.webhookRetries(tagOf(tenant)), gone...).Err(); err != nil {
			return out, backend("drop webhook retries", err)
		}
	}
	return out, nil
}

// decodeOutboxEntry reads an outbox entry: _ep endpoint, _ev event letter, _id
// message id, _at time (unix ms), _rq request id, then _r, the record string.
// tenant is the name of the outbox's shard (WebhookTenants).
func decodeOutboxEntry(tenant domain.ShardName, x redis.XMessage) (domain.WebhookMessage, bool) {
	m := domain.WebhookMessage{Tenant: tenantOf(tenant), EntryID: x.ID}
	if m.Tenant != string(tenant) {
		m.Shard = tenant
	}
	var rid, rec string
	for k, v := range x.Values {
		sv, _ := v.(string)
		switch k {
		case "_ep":
			m.EndpointID = sv
		case "_ev":
			m.Event = letterEvent(sv)
		case "_id":
			m.ID = sv
		case "_at":
			n, _ := strconv.ParseInt(sv, 10, 64)
			m.At = time.UnixMilli(n).UTC()
		case "_rq":
			rid = sv
		case "_r":
			rec = sv
		}
	}
	if m.EndpointID == "" || m.Event == "" || m.ID == "" || rid == "" {
		return m, false
	}
	r, err := decodeRecord(rid, rec, false)
	if err != nil {
		return m, false
	}
	m.Request = r
	return m, true
}

// SettleWebhook records the outcome of an attempt at m in one script. When
// another replica had taken the retry over (this one's lease ran out), the
// attempt is still logged and a delivery still removes the message, but the
// schedule is left to that replica.
func (s *Store) SettleWebhook(ctx context.Context, m domain.WebhookMessage, o domain.WebhookSettlement) error {
	next, due, log, force := "", "", "", ""
	if !o.NextAttempt.IsZero() {
		next, due = m.EntryID+"|"+strconv.Itoa(m.Attempt), ms(o.NextAttempt)
	}
	if o.Log != nil {
		b, err := json.Marshal(o.Log)
		if err != nil {
			return fmt.Errorf("settle webhook message %s: %w", m.ID, err)
		}
		log = string(b)
	}
	if o.Done {
		force = "1"
	}
	lease := ""
	if m.Retry != "" {
		lease = strconv.FormatInt(m.Lease, 10)
	}
	r, err := s.run(ctx, s.sc.webhookSettle, scriptCall{keys: []string{s.k.outbox(tagOf(m.Queue())), s.k.webhookRetries(tagOf(m.Queue())), s.k.webhookLog(tagOf(m.Queue()), m.EndpointID)},
		args: []any{webhookGroup, m.EntryID, m.Retry, lease, next, due, log, webhookLogCap, force}})
	if err != nil {
		return backend("settle webhook message "+m.ID, err)
	}
	switch r.code {
	case codeOK, codeLeaseLost:
		return nil
	}
	return unexpected("settle webhook message", r)
}

// ReapWebhookConsumers removes from a tenant's consumer group the consumers
// (dispatchers of replicas that are gone) idle longer than idle with nothing
// pending, except self. It returns how many it removed.
func (s *Store) ReapWebhookConsumers(ctx context.Context, tenant domain.ShardName, self string, idle time.Duration) (int, error) {
	return s.reapConsumers(ctx, s.k.outbox(tagOf(tenant)), webhookGroup, self, idle)
}

// reapConsumers removes from the consumer group of stream the consumers idle
// longer than idle with nothing pending, except self.
func (s *Store) reapConsumers(ctx context.Context, stream, group, self string, idle time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	cs, err := s.rdb.XInfoConsumers(ctx, stream, group).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOGROUP") || strings.Contains(err.Error(), "no such key") {
			return 0, nil
		}
		return 0, backend("list consumers of "+group, err)
	}
	n := 0
	for _, c := range cs {
		if c.Name == self || c.Pending > 0 || c.Idle < idle {
			continue
		}
		if err := s.rdb.XGroupDelConsumer(ctx, stream, group, c.Name).Err(); err != nil {
			return n, backend("remove consumer of "+group, err)
		}
		n++
	}
	return n, nil
}
