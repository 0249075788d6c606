// Package sweep is the sweeper's policy: how often it runs, how much one
// pass takes on, how far behind it is and when to say so. Every serve replica
// runs one. The store does the Redis work (what is due, the guarded
// transitions, the cleanup) behind Store: the timeouts are compare-and-set
// transitions and the cleanup re-checks each entry, so concurrent sweepers only
// duplicate reads. It never runs a script over more than one tenant: the store
// hands out the tenant registry page by page and works shard by shard, each in
// its own hash slot.
package sweep

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/defaults"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/throttle"
)

// Store is what the sweeper needs of the store (internal/store).
type Store interface {
	// Now is the store's clock: what is due is due by it.
	Now() time.Time
	// SweepPage reads one page of the tenant registry (cursor 0: the first;
	// next 0: the end) and what is due in its tenants' shards at now, at most
	// batch of each kind per shard; on an error, what it read before it.
	SweepPage(ctx context.Context, cursor uint64, now time.Time, batch int) (due []domain.SweepDue, next uint64, err error)
	// SweepTimeOut times out the due processing requests (and expires the
	// queued ones a stray deadline entry names).
	SweepTimeOut(ctx context.Context, due domain.SweepDue) (expired, failed int64, err error)
	// SweepExpireQueued expires the due queued requests.
	SweepExpireQueued(ctx context.Context, due domain.SweepDue) (expired int64, err error)
	// SweepClean removes the index entries of records past their retention
	// from the ended buckets, at most batch; full: the batch ran out first.
	SweepClean(ctx context.Context, due domain.SweepDue, now time.Time, batch int) (cleaned int64, full bool, err error)
	// IsDown tells an error of Redis being unreachable or slow.
	IsDown(err error) bool
}

// Options tune a Sweeper.
type Options struct {
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

// Stats are a sweeper's counters since it was made, for metrics.
type Stats struct {
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
// removes the index entries of records past their retention (docs/reference.md §6).
type Sweeper struct {
	st Store
	o  Options

	mu        sync.Mutex
	stats     Stats
	errorLog  throttle.Throttle // at most one error line a minute
	behindLog throttle.Throttle // at most one "behind" line a minute
}

// New makes a sweeper over the store's tenants.
func New(st Store, o Options) *Sweeper {
	if o.Interval <= 0 {
		o.Interval = defaults.SweepInterval
	}
	if o.Batch <= 0 {
		o.Batch = defaults.SweepBatch
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Sweeper{st: st, o: o}
}

// Stats returns a copy of the counters.
func (w *Sweeper) Stats() Stats {
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

// Tick sweeps every registered tenant once: at most Batch due processing
// deadlines, Batch due queued requests and Batch due retention entries each. It
// returns the first error it met. Other tenants are still swept after an error
// of one tenant's, but not once Redis looks down or slow: the tick then ends at
// once instead of waiting out a timeout per tenant.
func (w *Sweeper) Tick(ctx context.Context) error {
	start := time.Now()
	now := w.st.Now()
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
		down = down || w.st.IsDown(err)
	}
	var expired, failed, cleaned int64
	var cursor uint64
	for {
		work, next, err := w.st.SweepPage(ctx, cursor, now, w.o.Batch)
		note(err)
		for _, wk := range work {
			if at, ok := wk.Oldest(); ok {
				lag = max(lag, now.Sub(time.UnixMilli(int64(at))))
			}
			if wk.Most() >= w.o.Batch {
				w.behind(wk.Tenant)
			}
			if !down {
				e, f, err := w.st.SweepTimeOut(ctx, wk)
				expired, failed = expired+e, failed+f
				note(err)
			}
			if !down {
				e, err := w.st.SweepExpireQueued(ctx, wk)
				expired += e
				note(err)
			}
			if !down {
				c, full, err := w.st.SweepClean(ctx, wk, now, w.o.Batch)
				cleaned += c
				if full {
					w.behind(wk.Tenant)
				}
				note(err)
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
	w.stats.Expired += expired
	w.stats.Failed += failed
	w.stats.Cleaned += cleaned
	w.stats.LastRun, w.stats.LastDuration, w.stats.LastLag = start, time.Since(start), lag
	if firstErr != nil {
		w.stats.Errors++
		w.stats.LastError = firstErr.Error()
	} else {
		w.stats.LastError = ""
	}
	return firstErr
}
