package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// The audit trail, the Redis way (docs/operations.md, Audit trail).
//
// create.lua, transition.lua and delete.lua append one entry per applied call
// to the tenant's audit stream (keys.audit) in the same script as the change
// (audit_add in lib.lua), so no change is applied without its entry. Drainers
// (internal/audit, one per replica) read the streams through the consumer
// group "audit", hand the entries to the sink, and only then acknowledge them
// and trim the stream (XACK, XTRIM MINID), so the stream holds only what no
// sink has taken yet. Entries a drainer read and never acknowledged (it died) are taken over
// by another one (XAUTOCLAIM). While no sink takes them, a tenant's stream
// grows to Options.AuditBacklog entries; past that a script counts the event
// in the tenant meta hash (field ad) instead of recording it, and the drainer
// reports the count to the sink.

const (
	// auditGroup is the audit stream's consumer group every drainer joins.
	auditGroup = "audit"
	// auditDroppedField counts, in the tenant meta hash, the events not recorded
	// at the bound and not yet reported.
	auditDroppedField = "ad"
)

// OnAudit sets f to be told the tenant of every applied create, transition and
// delete (idempotent replays excluded), which recorded an audit entry: the
// name of the tenant's shard that holds it, as AuditTenants names it. f must
// be quick and must not block: it runs on the request's path. nil removes it.
func (s *Store) OnAudit(f func(domain.ShardName)) {
	if f == nil {
		s.auditHook.f.Store(nil)
		return
	}
	s.auditHook.f.Store(&f)
}

// AuditTenants reads the tenant registry (every tenant that created a request)
// and names each shard of each tenant: a tenant's shard 0 by the tenant's name,
// its shard s > 0 by "<tenant>:<n>" (shardName), since each shard has its own
// audit stream. The drainer passes these names back to every other call; the
// events it gets carry the tenant.
func (s *Store) AuditTenants(ctx context.Context) ([]domain.ShardName, error) {
	ts, err := s.tenantList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]domain.ShardName, 0, len(ts)*s.opts.TenantShards)
	for _, t := range ts {
		for _, tag := range s.tenantTags(t) {
			out = append(out, shardName(tag))
		}
	}
	return out, nil
}

// ReadAudit reads, for consumer, up to count new audit entries of each tenant
// (XREADGROUP ">"). They are pending on consumer until AckAudit; if it dies,
// ClaimStaleAudit lets another consumer take them over. A tenant's consumer
// group is made on first use, from the start of its stream.
func (s *Store) ReadAudit(ctx context.Context, consumer string, tenants []domain.ShardName, count int) ([]domain.AuditEvent, error) {
	got, err := s.readNew(ctx, "read audit stream", auditGroup, consumer, tenants, func(t domain.ShardName) string { return s.k.audit(tagOf(t)) },
		func(domain.ShardName) int64 { return int64(count) })
	var out []domain.AuditEvent
	for t, xs := range got {
		out = append(out, s.decodeAudit(ctx, t, xs)...)
	}
	return out, err
}

// ClaimStaleAudit takes over, for consumer, up to count entries of each tenant
// that another consumer read more than minIdle ago and never acknowledged
// (XAUTOCLAIM from the start of the pending list: one call per tenant, so a
// tenant with more stale entries is finished on the next calls).
func (s *Store) ClaimStaleAudit(ctx context.Context, consumer string, tenants []domain.ShardName, minIdle time.Duration, count int) ([]domain.AuditEvent, error) {
	var out []domain.AuditEvent
	var firstErr error
	for len(tenants) > 0 {
		chunk := tenants[:min(len(tenants), pipelineBatch)]
		tenants = tenants[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		cmds := make([]*redis.XAutoClaimCmd, len(chunk))
		_, _ = s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, t := range chunk {
				cmds[i] = p.XAutoClaim(cctx, &redis.XAutoClaimArgs{Stream: s.k.audit(tagOf(t)), Group: auditGroup,
					Consumer: consumer, MinIdle: minIdle, Start: "0-0", Count: int64(count)})
			}
			return nil
		})
		cancel()
		for i, c := range cmds {
			res, _, err := c.Result()
			if err != nil && !errors.Is(err, redis.Nil) && !strings.HasPrefix(err.Error(), "NOGROUP") && firstErr == nil {
				firstErr = backend("claim stale audit entries", err)
			}
			out = append(out, s.decodeAudit(ctx, chunk[i], res)...)
		}
	}
	return out, firstErr
}

// decodeAudit decodes audit entries. One that does not decode (written by
// hand, or by a later version) is acknowledged and deleted, so that it is not
// handed out again and again; it cannot carry an event, so nothing is lost.
func (s *Store) decodeAudit(ctx context.Context, tenant domain.ShardName, xs []redis.XMessage) []domain.AuditEvent {
	return decodeStream(ctx, s, s.k.audit(tagOf(tenant)), auditGroup, xs, func(x redis.XMessage) (domain.AuditEvent, bool) {
		return decodeAuditEntry(tenant, x)
	})
}

// decodeAuditEntry reads an entry's one field, e: request id, version, seq,
// from, to, by, at (unix ms), request type, failure code, joined by byte 31
// (audit_add in lib.lua).
func decodeAuditEntry(tenant domain.ShardName, x redis.XMessage) (domain.AuditEvent, bool) {
	v, _ := x.Values["e"].(string)
	f := strings.Split(v, "\x1f")
	if len(f) != 9 || !validID(f[0]) {
		return domain.AuditEvent{}, false
	}
	ver, err1 := strconv.ParseInt(f[1], 10, 64)
	seq, err2 := strconv.Atoi(f[2])
	at, err3 := strconv.ParseInt(f[6], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return domain.AuditEvent{}, false
	}
	// Entry names the shard's stream too, where it is not the tenant's shard 0
	// (AckAudit reads it back with auditEntry).
	entry := x.ID
	if t := tenantOf(tenant); t != string(tenant) {
		entry = x.ID + "@" + string(tenant)
	}
	e := domain.AuditEvent{EventID: "evt_" + f[0] + "_" + f[1], Tenant: tenantOf(tenant), RequestID: f[0], RequestType: f[7],
		Seq: seq, By: f[5], At: domain.TimeMs(at), Version: ver, FailureCode: f[8], Entry: entry}
	if st, ok := codeStatus[f[3]]; ok {
		e.From = &st
	}
	if st, ok := codeStatus[f[4]]; ok {
		e.To = &st
	}
	switch {
	case e.To == nil && e.From != nil:
		e.Type = domain.AuditDeleted
	case e.To == nil:
		return domain.AuditEvent{}, false
	case e.From != nil && *e.From == *e.To:
		e.Type = domain.AuditHeartbeat
	default:
		e.Type = string(domain.EventFor(*e.To))
	}
	return e, true
}

// AckAudit acknowledges the entries the sink has written and trims each
// stream up to its oldest entry still pending or unread, so the stream keeps
// only what waits. Trimming (XTRIM MINID) costs Redis a twentieth of deleting
// the entries one by one (XDEL: about 1 µs an entry, docs/performance-log.md item
// 18). It is safe without a script: every entry below the smaller of the
// oldest pending id and the newest acknowledged id + 1 was delivered (this
// consumer read up to there) and is no longer pending, so written; entries
// read meanwhile by other consumers are newer than that. Acknowledged entries
// above an older pending one (another replica's batch) are deleted with XDEL.
func (s *Store) AckAudit(ctx context.Context, evs []domain.AuditEvent) error {
	byTenant := map[domain.ShardName][]string{}
	newest := map[domain.ShardName]string{}
	var order []domain.ShardName
	for _, e := range evs {
		id, name := auditEntry(e)
		if _, ok := byTenant[name]; !ok {
			order = append(order, name)
		}
		byTenant[name] = append(byTenant[name], id)
		if streamIDLess(newest[name], id) {
			newest[name] = id
		}
	}
	for len(order) > 0 {
		chunk := order[:min(len(order), pipelineBatch)]
		order = order[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		pending := make([]*redis.XPendingCmd, len(chunk))
		_, err := s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, t := range chunk {
				p.XAck(cctx, s.k.audit(tagOf(t)), auditGroup, byTenant[t]...)
				pending[i] = p.XPending(cctx, s.k.audit(tagOf(t)), auditGroup)
			}
			return nil
		})
		if err != nil {
			cancel()
			return backend("acknowledge audit entries", err)
		}
		_, err = s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, t := range chunk {
				below := nextStreamID(newest[t])
				if pc := pending[i].Val(); pc != nil && pc.Count > 0 && streamIDLess(pc.Lower, below) {
					// An older entry is still pending (read by another consumer):
					// trim below it, and delete ours above it one by one, so
					// the stream's length stays what waits.
					below = pc.Lower
					var above []string
					for _, id := range byTenant[t] {
						if !streamIDLess(id, below) {
							above = append(above, id)
						}
					}
					if len(above) > 0 {
						p.XDel(cctx, s.k.audit(tagOf(t)), above...)
					}
				}
				p.XTrimMinID(cctx, s.k.audit(tagOf(t)), below)
			}
			return nil
		})
		cancel()
		if err != nil {
			return backend("trim audit streams", err)
		}
	}
	return nil
}

// auditEntry is where e waits: its stream entry id, and the name of its
// shard (the tenant for shard 0; see decodeAuditEntry).
func auditEntry(e domain.AuditEvent) (id string, name domain.ShardName) {
	if id, name, ok := strings.Cut(e.Entry, "@"); ok {
		return id, domain.ShardName(name)
	}
	return e.Entry, domain.ShardName(e.Tenant)
}

// streamIDLess orders stream entry ids ("<ms>-<seq>"); "" is below every id.
func streamIDLess(a, b string) bool {
	am, as := splitStreamID(a)
	bm, bs := splitStreamID(b)
	return am < bm || (am == bm && as < bs)
}

func splitStreamID(id string) (ms, seq uint64) {
	if id == "" {
		return 0, 0
	}
	m, q, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(m, 10, 64)
	seq, _ = strconv.ParseUint(q, 10, 64)
	return ms, seq + 1 // +1: "" (0, 0) stays below "0-0"
}

// nextStreamID is the id right after id.
func nextStreamID(id string) string {
	m, q, _ := strings.Cut(id, "-")
	seq, _ := strconv.ParseUint(q, 10, 64)
	return m + "-" + strconv.FormatUint(seq+1, 10)
}

// AuditBacklog reads, for each tenant, how many audit entries wait in its
// stream and how many events were not recorded at the bound (not yet reported).
func (s *Store) AuditBacklog(ctx context.Context, tenants []domain.ShardName) ([]domain.AuditBacklog, error) {
	out := make([]domain.AuditBacklog, 0, len(tenants))
	for len(tenants) > 0 {
		chunk := tenants[:min(len(tenants), pipelineBatch)]
		tenants = tenants[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		lens := make([]*redis.IntCmd, len(chunk))
		drops := make([]*redis.StringCmd, len(chunk))
		_, err := s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, t := range chunk {
				lens[i] = p.XLen(cctx, s.k.audit(tagOf(t)))
				drops[i] = p.HGet(cctx, s.k.meta(tagOf(t)), auditDroppedField)
			}
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			return out, backend("read audit backlog", err)
		}
		for i, t := range chunk {
			d, _ := strconv.ParseInt(drops[i].Val(), 10, 64)
			out = append(out, domain.AuditBacklog{Tenant: t, Waiting: lens[i].Val(), Dropped: d})
		}
	}
	return out, nil
}

// ForgetAuditDropped subtracts n reported drops from tenant's count.
func (s *Store) ForgetAuditDropped(ctx context.Context, tenant domain.ShardName, n int64) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	if err := s.rdb.HIncrBy(ctx, s.k.meta(tagOf(tenant)), auditDroppedField, -n).Err(); err != nil {
		return backend(fmt.Sprintf("forget %d reported audit drops of %s", n, tenant), err)
	}
	return nil
}

// ReapAuditConsumers removes from a tenant's audit group the consumers (drainers
// of replicas that are gone) idle longer than idle with nothing pending, except
// self. It returns how many it removed.
func (s *Store) ReapAuditConsumers(ctx context.Context, tenant domain.ShardName, self string, idle time.Duration) (int, error) {
	return s.reapConsumers(ctx, s.k.audit(tagOf(tenant)), auditGroup, self, idle)
}
