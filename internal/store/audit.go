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
// (audit_add in lib.lua), so no change is applied without its entry. The
// stream holds only what no sink has taken yet: drainers (internal/audit, one
// per replica) read it from its start (XRANGE), hand the entries to the sink,
// and only then trim it below the newest entry written (XTRIM MINID), so an
// entry leaves Redis only once a sink wrote it, whoever dies when. A lease
// (keys.auditLease, SET NX with a TTL, released by the trim) lets one drainer
// at a time read a stream, so that replicas do not write the same entries
// twice; if its holder dies mid-batch, the lease ends and another drainer
// reads the same entries again (at least once). There is no consumer group:
// its per-entry bookkeeping (a pending entry made by XREADGROUP, propagated
// as an XCLAIM, removed by XACK) cost Redis 17,000 of the 18,300 instructions
// an entry's drain took (callgrind; docs/performance.md, Where a write's CPU
// goes). While no sink takes them, a tenant's stream grows to
// Options.AuditBacklog entries; past that a script counts the event in the
// tenant meta hash (field ad) instead of recording it, and the drainer
// reports the count to the sink.

const (
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

// ReadAudit reads, for consumer, up to count of the oldest audit entries of
// each tenant whose stream no other drainer holds, and holds those streams for
// lease (keys.auditLease): AckAudit trims what was written and lets the stream
// go. Entries read and never acknowledged (the drainer died, or its sink
// failed) stay first in the stream: the next read, by this drainer or, once
// the lease ended, by another, hands them out again. One round trip for all
// tenants (pipelineBatch/2 per pipeline).
func (s *Store) ReadAudit(ctx context.Context, consumer string, tenants []domain.ShardName, count int, lease time.Duration) ([]domain.AuditEvent, error) {
	var out []domain.AuditEvent
	var firstErr error
	for len(tenants) > 0 {
		chunk := tenants[:min(len(tenants), pipelineBatch/2)]
		tenants = tenants[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		now := s.now()
		// The lease holds "<consumer>|<end, unix ms>": its end is also read
		// on the store's clock, so that a lease Redis keeps past its TTL (the
		// embedded store's miniredis expires keys only as its clock moves) still ends.
		mine := consumer + "|" + strconv.FormatInt(now.Add(lease).UnixMilli(), 10)
		holders := make([]*redis.Cmd, len(chunk))
		ranges := make([]*redis.XMessageSliceCmd, len(chunk))
		_, _ = s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, t := range chunk {
				tag := tagOf(t)
				// SET NX GET: the lease is taken when free, and its holder read, in one command.
				holders[i] = p.Do(cctx, "SET", s.k.auditLease(tag), mine, "NX", "PX", max(lease.Milliseconds(), 1), "GET")
				ranges[i] = p.XRangeN(cctx, s.k.audit(tag), "-", "+", int64(count))
			}
			return nil
		})
		for i, t := range chunk {
			holder, err := holders[i].Text()
			if err != nil && !errors.Is(err, redis.Nil) {
				if firstErr == nil {
					firstErr = backend("read audit stream", err)
				}
				continue
			}
			if err == nil {
				name, end, _ := strings.Cut(holder, "|")
				endMs, _ := strconv.ParseInt(end, 10, 64)
				if name != consumer && endMs > now.UnixMilli() {
					continue // another drainer's batch: its entries are not ours to write
				}
				if name != consumer {
					// Its lease ended without the trim (it died, or its sink
					// fails): take the stream over. Racing another taker can
					// only write the batch twice.
					if err := s.rdb.Set(cctx, s.k.auditLease(tagOf(t)), mine, lease).Err(); err != nil {
						if firstErr == nil {
							firstErr = backend("take over audit stream", err)
						}
						continue
					}
				}
			}
			xs, err := ranges[i].Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				if firstErr == nil {
					firstErr = backend("read audit stream", err)
				}
				continue
			}
			out = append(out, s.decodeAudit(ctx, t, xs)...)
		}
		cancel()
	}
	return out, firstErr
}

// decodeAudit decodes audit entries. One that does not decode (written by
// hand, or by a later version) is deleted, so that it is not handed out again
// and again; it cannot carry an event, so nothing is lost.
func (s *Store) decodeAudit(ctx context.Context, tenant domain.ShardName, xs []redis.XMessage) []domain.AuditEvent {
	out := make([]domain.AuditEvent, 0, len(xs))
	var bad []string
	for _, x := range xs {
		if e, ok := decodeAuditEntry(tenant, x); ok {
			out = append(out, e)
		} else {
			bad = append(bad, x.ID)
		}
	}
	if len(bad) > 0 {
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		_ = s.rdb.XDel(cctx, s.k.audit(tagOf(tenant)), bad...).Err()
		cancel()
	}
	return out
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

// AckAudit removes the entries the sink has written, and what lies below
// them, from their streams (XTRIM MINID past the newest of each stream), and
// ends the read's lease: one round trip for all of them. Safe without a
// script: a stream is read from its start, so every entry below the newest one
// read was read too (and written, or deleted as undecodable); entries added
// meanwhile are newer. The lease is deleted whoever holds it: a drainer whose
// lease ran out during its batch may release a successor's, which can only
// make a third drainer write that successor's batch again (at least once, never
// less).
func (s *Store) AckAudit(ctx context.Context, evs []domain.AuditEvent) error {
	newest := map[domain.ShardName]string{}
	var order []domain.ShardName
	for _, e := range evs {
		id, name := auditEntry(e)
		if _, ok := newest[name]; !ok {
			order = append(order, name)
		}
		if streamIDLess(newest[name], id) {
			newest[name] = id
		}
	}
	_, err := eachPipelined(ctx, s, order, func(ctx context.Context, p redis.Pipeliner, t domain.ShardName) *redis.IntCmd {
		p.XTrimMinID(ctx, s.k.audit(tagOf(t)), nextStreamID(newest[t]))
		return p.Del(ctx, s.k.auditLease(tagOf(t)))
	})
	if err != nil {
		return backend("trim audit streams", err)
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
