package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/throttle"
)

// SweeperOptions tune a Sweeper.
type SweeperOptions struct {
	// Interval between ticks; each wait is jittered by up to ±10% so that replicas
	// started together drift apart. default: 10s.
	Interval time.Duration
	// Batch is the most deadline entries and the most retention entries one tick
	// handles per tenant (lifecycle.sweep_batch). default: 500.
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
// removes the index entries of records past their retention (spec §6). Every
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
		o.Interval = 10 * time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 500
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

// sweepWork is what one tick found due for one tenant.
type sweepWork struct {
	tenant    string
	deadlines []redis.Z
	retention []redis.Z
}

// Tick sweeps every registered tenant once: at most Batch due deadlines and Batch
// due retention entries each. It returns the first error it met. Other tenants are
// still swept after an error of one tenant's, but not once Redis looks down or
// slow: the tick then ends at once instead of waiting out a timeout per tenant.
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
		work, err := w.due(ctx, tenants, now)
		note(err)
		for _, wk := range work {
			for _, list := range [][]redis.Z{wk.deadlines, wk.retention} {
				if len(list) > 0 {
					lag = max(lag, now.Sub(time.UnixMilli(int64(list[0].Score))))
				}
				if len(list) >= w.o.Batch {
					w.behind(wk.tenant)
				}
			}
			if !down {
				note(w.timeOut(ctx, wk.tenant, wk.deadlines, &c))
			}
			if !down {
				note(w.clean(ctx, wk.tenant, wk.retention, now, &c))
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

// pipelineChunk bounds the commands of one pipeline: the embedded store's
// in-memory connection (miniredis over net.Pipe, which flushes every reply)
// deadlocks once a pipeline's bytes exceed its 4 KiB read buffer.
const pipelineChunk = 24

// due reads what is due for each of tenants, a few tenants per round trip.
func (w *Sweeper) due(ctx context.Context, tenants []string, now time.Time) ([]sweepWork, error) {
	by := &redis.ZRangeBy{Min: "-inf", Max: ms(now), Count: int64(w.o.Batch)}
	var out []sweepWork
	for len(tenants) > 0 {
		chunk := tenants[:min(len(tenants), pipelineChunk/2)]
		tenants = tenants[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, w.s.opts.OpTimeout)
		dl := make([]*redis.ZSliceCmd, len(chunk))
		rx := make([]*redis.ZSliceCmd, len(chunk))
		_, err := w.s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, t := range chunk {
				dl[i] = p.ZRangeByScoreWithScores(cctx, w.s.k.deadlines(t), by)
				rx[i] = p.ZRangeByScoreWithScores(cctx, w.s.k.retentionBuckets(t), by)
			}
			return nil
		})
		cancel()
		if err != nil {
			return out, backend("sweep: read due entries", err)
		}
		for i, t := range chunk {
			d, r := dl[i].Val(), rx[i].Val()
			if len(d) > 0 || len(r) > 0 {
				out = append(out, sweepWork{tenant: t, deadlines: d, retention: r})
			}
		}
	}
	return out, nil
}

// statusEach reads the status letter of each record of tenant (the record's
// first byte), "" where the record is missing, a few records per round trip.
func (s *Store) statusEach(ctx context.Context, tenant string, ids []string) ([]string, error) {
	out := make([]string, 0, len(ids))
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), pipelineChunk)]
		ids = ids[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		cmds := make([]*redis.StringCmd, len(chunk))
		_, err := s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, id := range chunk {
				cmds[i] = p.GetRange(cctx, s.k.record(tenant, id), 0, 0)
			}
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		for _, c := range cmds {
			out = append(out, c.Val()) // "" for a missing record
		}
	}
	return out, nil
}

// timeOut times out each due request with one guarded transition: the guard (the
// status read just before, and the deadline re-checked inside the script) makes a
// request that moved on, got a heartbeat or was timed out by another replica a
// no-op.
func (w *Sweeper) timeOut(ctx context.Context, tenant string, due []redis.Z, c *sweepCounts) error {
	if len(due) == 0 {
		return nil
	}
	ids := make([]string, len(due))
	for i, z := range due {
		ids[i], _ = z.Member.(string)
	}
	sts, err := w.s.statusEach(ctx, tenant, ids)
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
			done, err = w.s.ExpireQueued(ctx, tenant, id)
			if done {
				c.expired++
			}
		case domain.StatusProcessing:
			done, err = w.s.TimeOutProcessing(ctx, tenant, id)
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
		if err := w.s.rdb.ZRem(cctx, w.s.k.deadlines(tenant), stale...).Err(); err != nil {
			return backend("sweep: drop stale deadlines", err)
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
func (w *Sweeper) clean(ctx context.Context, tenant string, due []redis.Z, now time.Time, c *sweepCounts) error {
	budget := w.o.Batch
	for _, z := range due {
		end := strconv.FormatInt(int64(z.Score), 10)
		keys := []string{w.s.k.retentionBucketPrefix(tenant) + end, w.s.k.retentionBuckets(tenant)}
		for budget > 0 {
			n := min(budget, sweepChunk)
			r, err := w.s.run(ctx, w.s.sc.sweep, keys, ms(now), n, w.s.k.recordPrefix(tenant), end, w.s.k.indexPrefix(tenant))
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
