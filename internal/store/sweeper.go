package store

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/defaults"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/throttle"
)

// SweeperOptions tune a Sweeper.
type SweeperOptions struct {
	// Interval between ticks; each wait is jittered by up to ±10% so that replicas
	// started together drift apart. default: 10s.
	Interval time.Duration
	// Batch is the most due processing deadlines, the most due queued requests and
	// the most retention entries one tick handles per tenant
	// (lifecycle.sweep_batch). default: 500.
	Batch int
	// Log receives errors (at most one line a minute while Redis stays down) and a
	// warning when a tenant has more due entries than Batch. default: slog.Default().
	Log *slog.Logger
}

// SweepStats are a sweeper's counters since it was made, for metrics.
type SweepStats struct {
	// Runs counts ticks, Errors the ticks that failed (Redis down or slow).
	Runs, Errors int64
	// Expired counts queued -> expired and Failed processing -> failed transitions
	// this sweeper made (another replica may have won the others).
	Expired, Failed int64
	// Cleaned counts records whose index entries retention cleanup removed.
	Cleaned int64
	// LastRun is when the last tick started, LastDuration how long it took.
	LastRun      time.Time
	LastDuration time.Duration
	// LastLag is how overdue the oldest entry the last tick found was (0 when
	// nothing was due): growing values mean the sweeper does not keep up.
	LastLag time.Duration
	// LastError of the last failed tick, "" after a good one.
	LastError string
}

// Sweeper times out requests past their queued or processing deadline and
// removes the index entries of records past their retention (docs/reference.md §6). Every
// serve replica runs one: the timeouts are compare-and-set transitions and the
// cleanup re-checks each entry, so concurrent sweepers only duplicate reads. It
// never runs a script over more than one tenant: it walks the tenant registry and
// works tenant by tenant, each in its own hash slot.
type Sweeper struct {
	s *Store
	o SweeperOptions

	mu        sync.Mutex
	stats     SweepStats
	errorLog  throttle.Throttle // at most one error line a minute
	behindLog throttle.Throttle // at most one "behind" line a minute
}

// NewSweeper makes a sweeper over the store's tenants.
func (s *Store) NewSweeper(o SweeperOptions) *Sweeper {
	if o.Interval <= 0 {
		o.Interval = defaults.SweepInterval
	}
	if o.Batch <= 0 {
		o.Batch = defaults.SweepBatch
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Sweeper{s: s, o: o}
}

// Stats returns a copy of the counters.
func (w *Sweeper) Stats() SweepStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Run ticks until ctx is done. A failing tick is logged and counted; the next
// one comes after the usual interval, so a Redis outage never makes a busy loop.
func (w *Sweeper) Run(ctx context.Context) {
	t := time.NewTimer(w.wait())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := w.Tick(ctx); err != nil && ctx.Err() == nil {
			w.logError(err)
		}
		t.Reset(w.wait())
	}
}

func (w *Sweeper) wait() time.Duration {
	j := 0.9 + 0.2*rand.Float64()
	return time.Duration(float64(w.o.Interval) * j)
}

func (w *Sweeper) logError(err error) {
	ok, n := w.errorLog.Allow(time.Now())
	if !ok {
		return
	}
	w.o.Log.Warn("sweeper tick failed; retrying every interval", "err", err, "interval", w.o.Interval, "suppressed_since_last_log", n)
}

// behind warns, at most once a minute, that a tenant had a full batch due.
func (w *Sweeper) behind(tenant string) {
	if ok, _ := w.behindLog.Allow(time.Now()); !ok {
		return
	}
	w.o.Log.Warn("sweeper: a tenant had a full batch due; if this persists, raise lifecycle.sweep_batch or shorten lifecycle.sweep_interval",
		"tenant", tenant, "batch", w.o.Batch, "interval", w.o.Interval)
}

// sweepWork is what one tick found due for one shard of a tenant.
type sweepWork struct {
	tenant, tag string
	// deadlines: processing requests past their deadline (score: the deadline).
	deadlines []redis.Z
	// queued: queued requests past their queued timeout, the longest due first.
	queued []queuedDue
	// retention: retention buckets that have ended (score: the end).
	retention []redis.Z
}

// queuedDue is a queued request past its queued timeout, found in the queued
// index of its type (score created_at: the timeout is counted from it, so a
// queued request needs no deadline entry of its own).
type queuedDue struct {
	id, typ string
	due     float64 // unix ms: created_at + the type's queued timeout
}

// oldest is the earliest due time of the work, for the lag figure.
func (wk sweepWork) oldest() (float64, bool) {
	var t []float64
	if len(wk.deadlines) > 0 {
		t = append(t, wk.deadlines[0].Score)
	}
	if len(wk.queued) > 0 {
		t = append(t, wk.queued[0].due)
	}
	if len(wk.retention) > 0 {
		t = append(t, wk.retention[0].Score)
	}
	if len(t) == 0 {
		return 0, false
	}
	return slices.Min(t), true
}

// Tick sweeps every registered tenant once: at most Batch due processing
// deadlines, Batch due queued requests and Batch due retention entries each. It
// returns the first error it met. Other tenants are still swept after an error
// of one tenant's, but not once Redis looks down or slow: the tick then ends at
// once instead of waiting out a timeout per tenant.
func (w *Sweeper) Tick(ctx context.Context) error {
	start := time.Now()
	now := w.s.now()
	var lag time.Duration
	var firstErr error
	down := false
	note := func(err error) {
		if err == nil {
			return
		}
		if firstErr == nil {
			firstErr = err
		}
		down = down || isRedisDown(err)
	}
	var c sweepCounts
	var cursor uint64
	for {
		cctx, cancel := context.WithTimeout(ctx, w.s.opts.OpTimeout)
		tenants, next, err := w.s.rdb.SScan(cctx, w.s.k.tenants(), cursor, "", 100).Result()
		cancel()
		if err != nil {
			note(backend("sweep: list tenants", err))
			break
		}
		var units []sweepWork
		for _, t := range tenants {
			for _, tag := range w.s.tenantTags(t) {
				units = append(units, sweepWork{tenant: t, tag: tag})
			}
		}
		tags := make([]string, len(units))
		for i, u := range units {
			tags[i] = u.tag
		}
		note(w.s.trimChangeLogs(ctx, tags, now)) // watch.go
		work, err := w.due(ctx, units, now)
		note(err)
		for _, wk := range work {
			if at, ok := wk.oldest(); ok {
				lag = max(lag, now.Sub(time.UnixMilli(int64(at))))
			}
			if max(len(wk.deadlines), len(wk.queued), len(wk.retention)) >= w.o.Batch {
				w.behind(wk.tenant)
			}
			if !down {
				note(w.timeOut(ctx, wk, &c))
			}
			if !down {
				note(w.expireQueued(ctx, wk, &c))
			}
			if !down {
				note(w.clean(ctx, wk, now, &c))
			}
		}
		if next == 0 || down || ctx.Err() != nil {
			break
		}
		cursor = next
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Runs++
	w.stats.Expired += c.expired
	w.stats.Failed += c.failed
	w.stats.Cleaned += c.cleaned
	w.stats.LastRun, w.stats.LastDuration, w.stats.LastLag = start, time.Since(start), lag
	if firstErr != nil {
		w.stats.Errors++
		w.stats.LastError = firstErr.Error()
	} else {
		w.stats.LastError = ""
	}
	return firstErr
}

// sweepCounts are what one tick did.
type sweepCounts struct{ expired, failed, cleaned int64 }

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
func (w *Sweeper) due(ctx context.Context, units []sweepWork, now time.Time) ([]sweepWork, error) {
	by := &redis.ZRangeBy{Min: "-inf", Max: ms(now), Count: int64(w.o.Batch)}
	var out []sweepWork
	for len(units) > 0 {
		chunk := units[:min(len(units), pipelineBatch/3)]
		units = units[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, w.s.opts.OpTimeout)
		dl := make([]*redis.ZSliceCmd, len(chunk))
		rx := make([]*redis.ZSliceCmd, len(chunk))
		meta := make([]*redis.StringSliceCmd, len(chunk))
		_, err := w.s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, u := range chunk {
				dl[i] = p.ZRangeByScoreWithScores(cctx, w.s.k.deadlines(u.tag), by)
				rx[i] = p.ZRangeByScoreWithScores(cctx, w.s.k.retentionBuckets(u.tag), by)
				meta[i] = p.HKeys(cctx, w.s.k.meta(u.tag))
			}
			return nil
		})
		cancel()
		if err != nil {
			return out, backend("sweep: read due entries", err)
		}
		work := make([]sweepWork, len(chunk))
		for i, u := range chunk {
			work[i] = sweepWork{tenant: u.tenant, tag: u.tag, deadlines: dl[i].Val(), retention: rx[i].Val()}
		}
		if err := w.dueQueued(ctx, work, meta, now); err != nil {
			return out, err
		}
		for _, wk := range work {
			if len(wk.deadlines) > 0 || len(wk.queued) > 0 || len(wk.retention) > 0 {
				out = append(out, wk)
			}
		}
	}
	return out, nil
}

// dueQueued fills in each work's queued requests past their queued timeout: at
// most Batch per tenant, the longest due first. meta holds each tenant's meta
// hash fields.
func (w *Sweeper) dueQueued(ctx context.Context, work []sweepWork, meta []*redis.StringSliceCmd, now time.Time) error {
	type read struct {
		wk  *sweepWork
		typ string
		qt  time.Duration
		cmd *redis.ZSliceCmd
	}
	var reads []read
	for i := range work {
		for _, f := range meta[i].Val() {
			if typ, ok := strings.CutPrefix(f, "t:"); ok {
				reads = append(reads, read{wk: &work[i], typ: typ, qt: w.s.queuedTimeout(typ)})
			}
		}
	}
	for len(reads) > 0 {
		chunk := reads[:min(len(reads), pipelineBatch)]
		reads = reads[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, w.s.opts.OpTimeout)
		_, err := w.s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, r := range chunk {
				by := &redis.ZRangeBy{Min: "-inf", Max: ms(now.Add(-r.qt)), Count: int64(w.o.Batch)}
				chunk[i].cmd = p.ZRangeByScoreWithScores(cctx, w.s.k.index(r.wk.tag, domain.StatusQueued, r.typ), by)
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
				r.wk.queued = append(r.wk.queued, queuedDue{id: id, typ: r.typ, due: z.Score + float64(r.qt.Milliseconds())})
			}
		}
	}
	for i := range work {
		q := work[i].queued
		slices.SortFunc(q, func(a, b queuedDue) int { return cmp.Compare(a.due, b.due) })
		work[i].queued = q[:min(len(q), w.o.Batch)]
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

// timeOut times out each due request with one guarded transition: the guard (the
// status read just before, and the deadline re-checked inside the script) makes a
// request that moved on, got a heartbeat or was timed out by another replica a
// no-op.
func (w *Sweeper) timeOut(ctx context.Context, wk sweepWork, c *sweepCounts) error {
	tenant, tag, due := wk.tenant, wk.tag, wk.deadlines
	if len(due) == 0 {
		return nil
	}
	ids := make([]string, len(due))
	for i, z := range due {
		ids[i], _ = z.Member.(string)
	}
	sts, err := w.s.statusEach(ctx, tag, ids)
	if err != nil {
		return backend("sweep: read statuses", err)
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
			done, _, err = w.s.expireQueued(ctx, tag, tenant, id)
			if done {
				c.expired++
			}
			stale = append(stale, id)
		case domain.StatusProcessing:
			done, err = w.s.timeOutProcessing(ctx, tag, tenant, id)
			if done {
				c.failed++
			}
		default:
			stale = append(stale, id) // terminal: transitions drop the entry; repair
		}
		if err != nil {
			return fmt.Errorf("sweep: time out %s/%s: %w", tenant, id, err)
		}
	}
	if len(stale) > 0 {
		cctx, cancel := context.WithTimeout(ctx, w.s.opts.OpTimeout)
		defer cancel()
		if err := w.s.rdb.ZRem(cctx, w.s.k.deadlines(tag), stale...).Err(); err != nil {
			return backend("sweep: drop stale deadlines", err)
		}
	}
	return nil
}

// expireQueued expires each queued request past its queued timeout with one
// guarded transition (the guard re-checks status and timeout inside the
// script, so a request that moved on or was expired by another replica is a
// no-op). An index entry whose record is gone is removed.
func (w *Sweeper) expireQueued(ctx context.Context, wk sweepWork, c *sweepCounts) error {
	tenant, tag := wk.tenant, wk.tag
	for _, q := range wk.queued {
		done, gone, err := w.s.expireQueued(ctx, tag, tenant, q.id)
		if err != nil {
			return fmt.Errorf("sweep: expire %s/%s: %w", tenant, q.id, err)
		}
		if done {
			c.expired++
		}
		if gone {
			cctx, cancel := context.WithTimeout(ctx, w.s.opts.OpTimeout)
			err := w.s.rdb.ZRem(cctx, w.s.k.index(tag, domain.StatusQueued, q.typ), q.id).Err()
			cancel()
			if err != nil {
				return backend("sweep: drop a queued entry without record", err)
			}
		}
	}
	return nil
}

// sweepChunk bounds the bucket entries one sweep.lua call handles, so that no
// single script holds Redis for long.
const sweepChunk = 100

// clean empties the retention buckets that have ended (due: their ends, oldest
// first) with sweep.lua: at most Batch entries per tick and tenant. sweep.lua
// removes the index entry of each record past its retention (and the record, if
// its TTL has not fired yet) and leaves alone a record whose retention was
// extended meanwhile.
func (w *Sweeper) clean(ctx context.Context, wk sweepWork, now time.Time, c *sweepCounts) error {
	tenant, tag := wk.tenant, wk.tag
	budget := w.o.Batch
	for _, z := range wk.retention {
		end := strconv.FormatInt(int64(z.Score), 10)
		keys := []string{w.s.k.retentionBucketPrefix(tag) + end, w.s.k.retentionBuckets(tag)}
		for budget > 0 {
			n := min(budget, sweepChunk)
			r, err := w.s.run(ctx, w.s.sc.sweep, scriptCall{keys, []any{ms(now), n, w.s.k.recordPrefix(tag), end, w.s.k.indexPrefix(tag), w.s.k.indexHeads(tag)}})
			if err != nil {
				return backend("sweep: clean "+tenant, err)
			}
			if r.code != codeOK || len(r.rest) < 3 {
				return unexpected("sweep: clean "+tenant, r)
			}
			c.cleaned += toInt64(r.rest[0])
			budget -= int(toInt64(r.rest[2]))
			if toInt64(r.rest[1]) == 0 || toInt64(r.rest[2]) == 0 {
				break
			}
		}
		if budget <= 0 {
			w.behind(tenant)
			return nil
		}
	}
	return nil
}
