package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/defaults"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Store is what the drainer needs of the request store (internal/store).
type Store interface {
	// AuditTenants lists the tenants whose streams may hold entries.
	AuditTenants(ctx context.Context) ([]domain.ShardName, error)
	// ReadAudit hands consumer up to count of the oldest entries of each
	// tenant whose stream no other drainer holds, and holds those streams for
	// lease; what it handed out stays first in the stream until AckAudit.
	ReadAudit(ctx context.Context, consumer string, tenants []domain.ShardName, count int, lease time.Duration) ([]domain.AuditEvent, error)
	// AckAudit removes written entries and lets their streams go.
	AckAudit(ctx context.Context, evs []domain.AuditEvent) error
	// AuditBacklog counts the waiting and the dropped entries of each tenant.
	AuditBacklog(ctx context.Context, tenants []domain.ShardName) ([]domain.AuditBacklog, error)
	// ForgetAuditDropped subtracts reported drops.
	ForgetAuditDropped(ctx context.Context, tenant domain.ShardName, n int64) error
}

// Options tune a Drainer.
type Options struct {
	// Sink receives the lines. Required.
	Sink Sink
	// Consumer names this drainer in the streams' leases. default: host name,
	// process id and a random suffix (a restarted process is a new drainer;
	// what the old one read and did not write is read again once its lease
	// ends, after ClaimAfter).
	Consumer string
	// Bound is the entries a tenant's stream may hold (audit.max_backlog), for
	// the reports: the store enforces it. default: 0, not reported.
	Bound int64
	// ClaimAfter: how long a read holds a tenant's stream (the lease); entries
	// another drainer read and did not write within it (it died, or its sink
	// fails) are read again by the next drainer. default: 30s.
	ClaimAfter time.Duration
	// PollInterval: the longest the drainer sleeps with nothing to do; writes
	// made by this process wake it at once (Nudge). A batch the sink refused is
	// offered again after PollInterval, twice that, ... up to 30 x PollInterval.
	// default: 1s.
	PollInterval time.Duration
	// ReadAllInterval: how often every tenant's stream is read, for entries
	// other processes wrote and did not drain themselves (they died first).
	// Each read is one SET and one XRANGE per tenant, pipelined. default: 5s.
	ReadAllInterval time.Duration
	// ScanInterval: how often the backlog is counted (metrics, /readyz, the
	// report of events dropped at the bound): XLEN and HGET per tenant.
	// default: 10s.
	ScanInterval time.Duration
	// Batch: the most entries read from one tenant at a time. default: 1000.
	Batch int
	// Linger: how long the drainer waits, once a write of this process woke
	// it, before it reads, so that the writes of that moment are read,
	// written, acknowledged and trimmed as one batch (a handful of round trips
	// for hundreds of entries) rather than a few entries per round trip. It
	// delays audit lines, never loses them: the entries wait in Redis, written
	// in the same step as their change. default: 100ms; negative: none.
	Linger time.Duration
	// Log receives the sink's failures and recoveries. default: slog.Default().
	Log *slog.Logger
}

// Stats are the drainer's counters and its last view of the backlog.
type Stats struct {
	// Written lines (events, and reports of drops), SinkErrors failed batches.
	Written, SinkErrors int64
	// Dropped events reported: not recorded because a backlog was at its bound.
	Dropped int64
	// StoreErrors: failed store calls (Redis away).
	StoreErrors int64
	// Backlog: entries waiting in all tenants' streams at the last scan;
	// BacklogMax the largest tenant's; Bound the bound per tenant.
	Backlog, BacklogMax, Bound int64
	// SinkUp is false from a failed batch to the next written one.
	SinkUp bool
	// FailingSince and LastError describe the current failure.
	FailingSince time.Time
	LastError    string
}

// Drainer moves audit entries from Redis to the sink. Every serve replica runs
// one: a lease per stream lets one of them at a time read it, and an entry is
// deleted from Redis only after the sink wrote it (at least once: a crash
// between the write and the delete writes it again).
type Drainer struct {
	st    Store
	o     Options
	wake  chan struct{}
	mu    sync.Mutex
	dirty map[domain.ShardName]bool // tenants written by this process since the last read
	stats Stats
	// lastLog is when the failure was last logged (once a minute while it lasts).
	lastLog time.Time
}

// NewDrainer makes a drainer; Run starts it.
func NewDrainer(st Store, o Options) (*Drainer, error) {
	if o.Sink == nil {
		return nil, fmt.Errorf("audit: a sink is required")
	}
	if o.Consumer == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Consumer = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.ClaimAfter <= 0 {
		o.ClaimAfter = defaults.AuditClaimAfter
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.ReadAllInterval <= 0 {
		o.ReadAllInterval = 5 * time.Second
	}
	if o.ScanInterval <= 0 {
		o.ScanInterval = 10 * time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.Linger == 0 {
		o.Linger = 100 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Drainer{st: st, o: o, wake: make(chan struct{}, 1), dirty: map[domain.ShardName]bool{},
		stats: Stats{SinkUp: true, Bound: o.Bound}}, nil
}

// Nudge tells the drainer that tenant's stream grew (the store's OnAudit hook),
// so that it reads it at once instead of at its next poll. It never blocks.
func (d *Drainer) Nudge(tenant domain.ShardName) {
	d.mu.Lock()
	d.dirty[tenant] = true
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Stats reads the counters.
func (d *Drainer) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Status says whether the sink takes the lines, for /readyz: ok, or why not
// and what waits meanwhile.
func (d *Drainer) Status() (ok bool, detail string) {
	s := d.Stats()
	if s.SinkUp {
		return true, "ok"
	}
	return false, fmt.Sprintf("audit sink failing since %s: %s; %d events wait in Redis (at most %d per tenant, then they are counted as dropped)",
		s.FailingSince.UTC().Format(time.RFC3339), s.LastError, s.Backlog, s.Bound)
}

// Run drains until ctx ends, then makes one last pass (last); the caller
// closes the sink.
func (d *Drainer) Run(ctx context.Context) {
	var tenants []domain.ShardName
	var tenantsAt, polled, scanned, retryAt time.Time
	var held []domain.AuditEvent // a batch the sink refused, offered again before anything else
	// A refused batch is offered again after PollInterval, then after twice
	// that, up to 30 times PollInterval (30 s by default).
	retry := d.o.PollInterval
	for ctx.Err() == nil {
		now := time.Now()
		if tenantsAt.IsZero() || now.Sub(tenantsAt) >= d.o.ReadAllInterval {
			if ts, err := d.st.AuditTenants(ctx); err != nil {
				d.storeError(err)
			} else {
				tenants, tenantsAt = ts, now
			}
		}
		if held != nil {
			if !now.Before(retryAt) {
				if d.flush(ctx, held) {
					held, retry = nil, d.o.PollInterval
				} else {
					retryAt, retry = now.Add(retry), min(retry*2, 30*d.o.PollInterval)
				}
			}
			if held != nil {
				// The backlog is still counted on time while the sink fails.
				if now.Sub(scanned) >= d.o.ScanInterval {
					d.scan(ctx, tenants, false)
					scanned = now
				}
				d.sleep(ctx, min(time.Until(retryAt), d.o.ScanInterval-time.Since(scanned)), false)
				continue
			}
		}
		read := d.takeDirty()
		if now.Sub(polled) >= d.o.ReadAllInterval {
			read, polled = merge(read, tenants), now
		}
		var evs []domain.AuditEvent
		if len(read) > 0 {
			got, err := d.st.ReadAudit(ctx, d.o.Consumer, read, d.o.Batch, d.o.ClaimAfter)
			if err != nil {
				d.storeError(err)
			}
			evs = got
		}
		if len(evs) > 0 && !d.flush(ctx, evs) {
			held, retryAt, retry = evs, now.Add(retry), min(retry*2, 30*d.o.PollInterval)
			continue
		}
		if now.Sub(scanned) >= d.o.ScanInterval {
			d.scan(ctx, tenants, true)
			scanned = now
		}
		if len(evs) >= d.o.Batch { // more may wait: read on at once
			continue
		}
		if d.sleep(ctx, d.o.PollInterval, true) {
			d.sleep(ctx, d.o.Linger, false) // let the batch fill (Options.Linger)
		}
	}
	d.last(ctx, held)
}

// last makes one bounded pass when the drainer stops: the batch it holds, and
// what this process wrote since its last read. Whatever it cannot write waits
// in Redis for another replica, or for this one's restart.
func (d *Drainer) last(ctx context.Context, held []domain.AuditEvent) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if held != nil && !d.flush(ctx, held) {
		return
	}
	if dirty := d.takeDirty(); len(dirty) > 0 {
		if evs, _ := d.st.ReadAudit(ctx, d.o.Consumer, dirty, d.o.Batch, d.o.ClaimAfter); len(evs) > 0 {
			d.flush(ctx, evs)
		}
	}
}

// sleep waits for d, ctx's end or (when nudgeable) a nudge; it reports
// whether a nudge ended it.
func (d *Drainer) sleep(ctx context.Context, wait time.Duration, nudgeable bool) bool {
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	var wake <-chan struct{}
	if nudgeable {
		wake = d.wake
	}
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
		return true
	}
	return false
}

func (d *Drainer) takeDirty() []domain.ShardName {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.dirty) == 0 {
		return nil
	}
	out := make([]domain.ShardName, 0, len(d.dirty))
	for t := range d.dirty {
		out = append(out, t)
	}
	clear(d.dirty)
	return out
}

// merge adds to a the elements of b it lacks.
func merge(a, b []domain.ShardName) []domain.ShardName {
	seen := make(map[domain.ShardName]bool, len(a))
	for _, t := range a {
		seen[t] = true
	}
	for _, t := range b {
		if !seen[t] {
			a = append(a, t)
		}
	}
	return a
}

// flush writes evs to the sink and then removes them from Redis. It reports
// false when the sink refused them (they are to be offered again).
func (d *Drainer) flush(ctx context.Context, evs []domain.AuditEvent) bool {
	lines := make([][]byte, 0, len(evs))
	for _, e := range evs {
		l, err := Line(e)
		if err != nil { // cannot happen: every member is a string, number or time
			d.o.Log.Error("audit: event not encodable; left in Redis", "event_id", e.EventID, "err", err)
			continue
		}
		lines = append(lines, l)
	}
	if !d.write(ctx, lines) {
		return false
	}
	if err := d.st.AckAudit(ctx, evs); err != nil {
		// Written but still in Redis: another drainer (or this one) claims them
		// after ClaimAfter and writes them again; consumers de-duplicate.
		d.storeError(err)
	}
	return true
}

// write hands lines to the sink and keeps the sink's state.
func (d *Drainer) write(ctx context.Context, lines [][]byte) bool {
	if len(lines) == 0 {
		return true
	}
	err := d.o.Sink.Write(ctx, lines)
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if err != nil {
		d.stats.SinkErrors++
		if d.stats.SinkUp {
			d.stats.SinkUp, d.stats.FailingSince = false, now
		}
		d.stats.LastError = err.Error()
		if now.Sub(d.lastLog) >= time.Minute {
			d.lastLog = now
			d.o.Log.Error("audit sink failing: transitions go on, their audit entries wait in Redis and are written once it works",
				"err", err, "since", d.stats.FailingSince, "backlog", d.stats.Backlog, "bound_per_tenant", d.stats.Bound)
		}
		return false
	}
	if !d.stats.SinkUp {
		d.o.Log.Info("audit sink works again; writing the backlog", "failed_for", now.Sub(d.stats.FailingSince).Round(time.Millisecond).String(),
			"backlog", d.stats.Backlog)
		d.stats.SinkUp, d.stats.FailingSince, d.stats.LastError, d.lastLog = true, time.Time{}, "", time.Time{}
	}
	d.stats.Written += int64(len(lines))
	return true
}

func (d *Drainer) storeError(err error) {
	d.mu.Lock()
	d.stats.StoreErrors++
	log := time.Since(d.lastLog) >= time.Minute && d.stats.SinkUp
	if log {
		d.lastLog = time.Now()
	}
	d.mu.Unlock()
	if log {
		d.o.Log.Warn("audit: store call failed; entries wait in Redis", "err", err)
	}
}

// scan counts the backlog and, when report is set (the sink works), writes a
// line for each tenant's events dropped at the bound, then forgets them.
func (d *Drainer) scan(ctx context.Context, tenants []domain.ShardName, report bool) {
	if len(tenants) == 0 {
		return
	}
	bl, err := d.st.AuditBacklog(ctx, tenants)
	if err != nil {
		d.storeError(err)
		return
	}
	var total, most int64
	for _, b := range bl {
		total += b.Waiting
		most = max(most, b.Waiting)
	}
	d.mu.Lock()
	d.stats.Backlog, d.stats.BacklogMax = total, most
	d.mu.Unlock()
	if d.o.Bound > 0 && most >= d.o.Bound*8/10 {
		d.o.Log.Warn("audit backlog near its bound: past it, events are counted as dropped instead of recorded",
			"largest_tenant_backlog", most, "bound_per_tenant", d.o.Bound)
	}
	if !report {
		return
	}
	for _, b := range bl {
		if b.Dropped <= 0 {
			continue
		}
		d.o.Log.Error("audit events dropped: the tenant's audit backlog was at its bound (audit.max_backlog) while the sink failed",
			"tenant", b.Tenant, "dropped", b.Dropped, "bound_per_tenant", d.o.Bound)
		if !d.write(ctx, [][]byte{droppedLine(string(b.Tenant), b.Dropped, time.Now())}) {
			return
		}
		if err := d.st.ForgetAuditDropped(ctx, b.Tenant, b.Dropped); err != nil {
			d.storeError(err)
			continue
		}
		d.mu.Lock()
		d.stats.Dropped += b.Dropped
		d.mu.Unlock()
	}
}
