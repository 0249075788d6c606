package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// The Redis mechanics of the sweeper (internal/sweep): what is due, read a few
// shards per round trip, and the guarded transitions and the cleanup that act
// on it. The sweeper's policy (cadence, batch, lag, warnings) is its own.

// SweepPage reads one page of the tenant registry (cursor 0 is the first
// page, next 0 the end) and what is due in each shard of its tenants at now:
// at most batch due processing deadlines, due queued requests and ended
// retention buckets each. Shards with nothing due are left out. On an error it
// returns what it read before it, and next 0 when the registry itself could
// not be read.
func (s *Store) SweepPage(ctx context.Context, cursor uint64, now time.Time, batch int) (due []domain.SweepDue, next uint64, err error) {
	cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	tenants, next, err := s.rdb.SScan(cctx, s.k.tenants(), cursor, "", 100).Result()
	cancel()
	if err != nil {
		return nil, 0, backend("sweep: list tenants", err)
	}
	var units []domain.SweepDue
	var tags []string
	for _, t := range tenants {
		for _, tag := range s.tenantTags(t) {
			units = append(units, domain.SweepDue{Tenant: t, Tag: tag})
			tags = append(tags, tag)
		}
	}
	// The watches' change logs are trimmed by time and length here, never by
	// the writes that fill them (watch.go).
	trimErr := s.trimChangeLogs(ctx, tags, now)
	due, err = s.due(ctx, units, now, batch)
	if err == nil {
		err = trimErr
	}
	return due, next, err
}

// IsDown tells an error of Redis being unreachable, slow or not serving,
// after which a pass stops instead of waiting out a timeout per tenant.
func (s *Store) IsDown(err error) bool { return isRedisDown(err) }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// pipelineBatch bounds the commands of one pipeline of the background work
// that walks every tenant (sweeper, audit drainer, webhook dispatcher): each
// pipeline has its own OpTimeout, so a deployment with many tenants makes many
// short round trips, each sure to fit its deadline and none holding Redis (a
// single thread) for long, rather than one that grows with the tenants.
const pipelineBatch = 120

// due reads what is due for each shard of units, a few per round trip:
// processing deadlines and retention buckets from their zsets; queued requests
// from the queued index of each type the tenant has made (the meta hash's
// t:<type> fields), read in a second round trip.
func (s *Store) due(ctx context.Context, units []domain.SweepDue, now time.Time, batch int) ([]domain.SweepDue, error) {
	by := &redis.ZRangeBy{Min: "-inf", Max: ms(now), Count: int64(batch)}
	var out []domain.SweepDue
	for len(units) > 0 {
		chunk := units[:min(len(units), pipelineBatch/3)]
		units = units[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		dl := make([]*redis.ZSliceCmd, len(chunk))
		rx := make([]*redis.ZSliceCmd, len(chunk))
		meta := make([]*redis.StringSliceCmd, len(chunk))
		_, err := s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, u := range chunk {
				dl[i] = p.ZRangeByScoreWithScores(cctx, s.k.deadlines(u.Tag), by)
				rx[i] = p.ZRangeByScoreWithScores(cctx, s.k.retentionBuckets(u.Tag), by)
				meta[i] = p.HKeys(cctx, s.k.meta(u.Tag))
			}
			return nil
		})
		cancel()
		if err != nil {
			return out, backend("sweep: read due entries", err)
		}
		work := make([]domain.SweepDue, len(chunk))
		for i, u := range chunk {
			work[i] = domain.SweepDue{Tenant: u.Tenant, Tag: u.Tag, Deadlines: sweepEntries(dl[i].Val()), Retention: sweepEntries(rx[i].Val())}
		}
		if err := s.dueQueued(ctx, work, meta, now, batch); err != nil {
			return out, err
		}
		for _, wk := range work {
			if !wk.Empty() {
				out = append(out, wk)
			}
		}
	}
	return out, nil
}

// sweepEntries are the members of a zset read with their scores.
func sweepEntries(zs []redis.Z) []domain.SweepEntry {
	out := make([]domain.SweepEntry, len(zs))
	for i, z := range zs {
		out[i].ID, _ = z.Member.(string)
		out[i].Due = z.Score
	}
	return out
}

// dueQueued fills in each work's queued requests past their queued timeout: at
// most Batch per tenant, the longest due first. meta holds each tenant's meta
// hash fields.
func (s *Store) dueQueued(ctx context.Context, work []domain.SweepDue, meta []*redis.StringSliceCmd, now time.Time, batch int) error {
	type read struct {
		wk  *domain.SweepDue
		typ string
		qt  time.Duration
		cmd *redis.ZSliceCmd
	}
	var reads []read
	for i := range work {
		for _, f := range meta[i].Val() {
			if typ, ok := strings.CutPrefix(f, "t:"); ok {
				reads = append(reads, read{wk: &work[i], typ: typ, qt: s.queuedTimeout(typ)})
			}
		}
	}
	for len(reads) > 0 {
		chunk := reads[:min(len(reads), pipelineBatch)]
		reads = reads[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		_, err := s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, r := range chunk {
				by := &redis.ZRangeBy{Min: "-inf", Max: ms(now.Add(-r.qt)), Count: int64(batch)}
				chunk[i].cmd = p.ZRangeByScoreWithScores(cctx, s.k.index(r.wk.Tag, domain.StatusQueued, r.typ), by)
			}
			return nil
		})
		cancel()
		if err != nil {
			return backend("sweep: read due queued requests", err)
		}
		for _, r := range chunk {
			for _, z := range r.cmd.Val() {
				id, _ := z.Member.(string)
				r.wk.Queued = append(r.wk.Queued, domain.SweepEntry{ID: id, Type: r.typ, Due: z.Score + float64(r.qt.Milliseconds())})
			}
		}
	}
	for i := range work {
		q := work[i].Queued
		slices.SortFunc(q, func(a, b domain.SweepEntry) int { return cmp.Compare(a.Due, b.Due) })
		work[i].Queued = q[:min(len(q), batch)]
	}
	return nil
}

// statusEach reads the status letter of each record in the shard of tag (the
// record's first byte), "" where the record is missing, a few records per
// round trip.
func (s *Store) statusEach(ctx context.Context, tag string, ids []string) ([]string, error) {
	cmds, err := eachPipelined(ctx, s, ids, func(ctx context.Context, p redis.Pipeliner, id string) *redis.StringCmd {
		return p.GetRange(ctx, s.k.record(tag, id), 0, 0)
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = c.Val() // "" for a missing record
	}
	return out, nil
}

// SweepTimeOut times out each due processing request with one guarded transition: the guard (the
// status read just before, and the deadline re-checked inside the script) makes a
// request that moved on, got a heartbeat or was timed out by another replica a
// no-op.
//
// It returns how many requests it expired (queued: a stray deadline entry) and
// failed (processing).
func (s *Store) SweepTimeOut(ctx context.Context, wk domain.SweepDue) (expired, failed int64, err error) {
	tenant, tag, due := wk.Tenant, wk.Tag, wk.Deadlines
	if len(due) == 0 {
		return 0, 0, nil
	}
	ids := make([]string, len(due))
	for i, e := range due {
		ids[i] = e.ID
	}
	sts, err := s.statusEach(ctx, tag, ids)
	if err != nil {
		return 0, 0, backend("sweep: read statuses", err)
	}
	var stale []any
	for i, id := range ids {
		if sts[i] == "" || !validID(id) {
			stale = append(stale, id) // the record is gone; only its entry is left
			continue
		}
		var done bool
		var err error
		switch codeStatus[sts[i]] {
		case domain.StatusQueued:
			// A queued request's deadline entry is a stray: the queued index
			// times queued requests (expireQueued), so the entry goes whether
			// or not the request is due under the current timeout.
			done, _, err = s.expireQueued(ctx, tag, tenant, id)
			if done {
				expired++
			}
			stale = append(stale, id)
		case domain.StatusProcessing:
			done, err = s.timeOutProcessing(ctx, tag, tenant, id)
			if done {
				failed++
			}
		default:
			stale = append(stale, id) // terminal: transitions drop the entry; repair
		}
		if err != nil {
			return expired, failed, fmt.Errorf("sweep: time out %s/%s: %w", tenant, id, err)
		}
	}
	if len(stale) > 0 {
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		defer cancel()
		if err := s.rdb.ZRem(cctx, s.k.deadlines(tag), stale...).Err(); err != nil {
			return expired, failed, backend("sweep: drop stale deadlines", err)
		}
	}
	return expired, failed, nil
}

// SweepExpireQueued expires each queued request past its queued timeout with one
// guarded transition (the guard re-checks status and timeout inside the
// script, so a request that moved on or was expired by another replica is a
// no-op). An index entry whose record is gone is removed. It returns how many
// it expired.
func (s *Store) SweepExpireQueued(ctx context.Context, wk domain.SweepDue) (expired int64, err error) {
	tenant, tag := wk.Tenant, wk.Tag
	for _, q := range wk.Queued {
		done, gone, err := s.expireQueued(ctx, tag, tenant, q.ID)
		if err != nil {
			return expired, fmt.Errorf("sweep: expire %s/%s: %w", tenant, q.ID, err)
		}
		if done {
			expired++
		}
		if gone {
			cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
			err := s.rdb.ZRem(cctx, s.k.index(tag, domain.StatusQueued, q.Type), q.ID).Err()
			cancel()
			if err != nil {
				return expired, backend("sweep: drop a queued entry without record", err)
			}
		}
	}
	return expired, nil
}

// sweepChunk bounds the bucket entries one sweep.lua call handles, so that no
// single script holds Redis for long.
const sweepChunk = 100

// SweepClean empties the retention buckets that have ended (their ends, oldest
// first) with sweep.lua: at most batch entries. It returns how many records it
// cleaned and whether the batch ran out before the buckets did. sweep.lua
// removes the index entry of each record past its retention (and the record, if
// its TTL has not fired yet) and leaves alone a record whose retention was
// extended meanwhile.
func (s *Store) SweepClean(ctx context.Context, wk domain.SweepDue, now time.Time, batch int) (cleaned int64, full bool, err error) {
	tenant, tag := wk.Tenant, wk.Tag
	budget := batch
	for _, e := range wk.Retention {
		end := strconv.FormatInt(int64(e.Due), 10)
		keys := []string{s.k.retentionBucketPrefix(tag) + end, s.k.retentionBuckets(tag)}
		for budget > 0 {
			n := min(budget, sweepChunk)
			r, err := s.run(ctx, s.sc.sweep, scriptCall{keys: keys, args: []any{ms(now), n, s.k.recordPrefix(tag), end, s.k.indexPrefix(tag), s.k.indexHeads(tag)}})
			if err != nil {
				return cleaned, false, backend("sweep: clean "+tenant, err)
			}
			if r.code != codeOK || len(r.rest) < 3 {
				return cleaned, false, unexpected("sweep: clean "+tenant, r)
			}
			cleaned += toInt64(r.rest[0])
			budget -= int(toInt64(r.rest[2]))
			if toInt64(r.rest[1]) == 0 || toInt64(r.rest[2]) == 0 {
				break
			}
		}
		if budget <= 0 {
			return cleaned, true, nil
		}
	}
	return cleaned, false, nil
}
