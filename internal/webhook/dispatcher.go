package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/defaults"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/throttle"
)

// Outbox is what the dispatcher needs of the store: the outbox of every tenant
// with endpoints, read through a consumer group, and the endpoints themselves.
type Outbox interface {
	WebhookTenants(ctx context.Context) ([]domain.WebhookTenant, error)
	ReadOutbox(ctx context.Context, consumer string, want map[domain.ShardName]int) ([]domain.WebhookMessage, error)
	ClaimStaleOutbox(ctx context.Context, tenants []domain.ShardName, consumer string, minIdle time.Duration, count int) ([]domain.WebhookMessage, error)
	ClaimWebhookRetries(ctx context.Context, tenants []domain.ShardName, now, leaseUntil time.Time, count int) ([]domain.WebhookMessage, error)
	SettleWebhook(ctx context.Context, m domain.WebhookMessage, o domain.WebhookSettlement) error
	Webhook(ctx context.Context, c domain.Call, id string) (*domain.Webhook, error)
	PruneWebhookTenant(ctx context.Context, tenant domain.ShardName) (bool, error)
	ReapWebhookConsumers(ctx context.Context, tenant domain.ShardName, self string, idle time.Duration) (int, error)
}

// DispatcherOptions tune a Dispatcher.
type DispatcherOptions struct {
	// Timeout: a 2xx within this is a delivery (webhooks.timeout). default: 5s.
	Timeout time.Duration
	// RetrySchedule: the waits before each retry; after the last one fails the
	// message is failed (webhooks.retry_schedule). default: defaults.WebhookRetrySchedule.
	RetrySchedule []time.Duration
	// Guard decides which addresses may be dialled. Required.
	Guard *Guard
	// Sealer opens endpoint secrets. Required.
	Sealer *Sealer
	// Concurrency: attempts in flight at once in this replica. default: 32.
	Concurrency int
	// MaxPerTenant: attempts of one tenant in flight at once in this replica, so
	// that one tenant's slow receivers cannot take every slot. default:
	// Concurrency / 2 (at least 1).
	MaxPerTenant int
	// PollInterval between walks of every tenant's outbox and retries. Writes in
	// this process (Nudge) are looked at at once. default: 500ms.
	PollInterval time.Duration
	// ClaimIdle: a message read by a dispatcher that has not settled it for this
	// long is taken over by another (its replica died mid-delivery); it is also
	// the lease of a retry. Must exceed Timeout plus a store round trip or two.
	// default: Timeout + 5s.
	ClaimIdle time.Duration
	// RegistryInterval between reads of the registry of tenants with endpoints
	// (and their frozen flags). default: 2s.
	RegistryInterval time.Duration
	// Consumer names this dispatcher in the consumer groups. default: host name,
	// pid and a random suffix.
	Consumer string
	// BodyLimit: at most this much of a receiver's answer is read. default: 4096.
	BodyLimit int64
	// Log receives failures (Redis errors at most once a minute) and final
	// failures of messages. default: slog.Default().
	Log *slog.Logger
	// Now is the clock. default: time.Now.
	Now func() time.Time
	// Tracer, when set, makes a span of every attempt in the create's trace
	// and sends its traceparent (docs/reference.md §17). default: nil, no
	// tracing work.
	Tracer Tracer
}

// Tracer is what the dispatcher asks of tracing (internal/tracing implements
// it).
type Tracer interface {
	// StartDelivery starts the span of one attempt at a message of request
	// requestID, in the trace of kept (the create's kept trace context, ""
	// for none); end is given the receiver's status (0 for none) and the
	// failure ("" on success). host is the endpoint's host.
	StartDelivery(ctx context.Context, kept, requestID, event, host string, attempt int) (context.Context, func(status int, failure string))
	// Inject writes ctx's span into h as traceparent (and tracestate).
	Inject(ctx context.Context, h http.Header)
}

// DispatchStats are a dispatcher's counters since it was made.
type DispatchStats struct {
	// Attempts made; of them Delivered, Retrying (failed, another attempt is
	// scheduled) and Failed (failed after the last step).
	Attempts, Delivered, Retrying, Failed int64
	// Dropped messages whose endpoint was deleted.
	Dropped int64
	// StoreErrors counts failed store calls (Redis away); LastStoreError the last one.
	StoreErrors    int64
	LastStoreError string
}

// Dispatcher delivers outbox messages. Every serve replica runs one; the
// consumer group gives each message to one dispatcher, a retry is claimed with
// a lease, and a message whose dispatcher died is taken over after ClaimIdle.
type Dispatcher struct {
	out    Outbox
	o      DispatcherOptions
	client *http.Client

	sem      chan struct{} // one slot per attempt in flight
	wake     chan struct{}
	inflight sync.WaitGroup

	// watched is a copy of known for Nudge, which runs on every create and
	// transition of the process: tenants without endpoints cost no lock.
	watched atomic.Pointer[map[domain.ShardName]bool]

	mu          sync.Mutex
	active      []domain.ShardName        // tenants to walk: in the registry and not frozen
	known       map[domain.ShardName]bool // tenant -> active
	dirty       map[domain.ShardName]bool // tenants written to by this process since the last read
	busy        map[domain.ShardName]int  // attempts in flight per tenant
	backlog     map[domain.ShardName]bool // tenants whose last read got all it asked for
	rot         int
	lastRefresh time.Time
	lastFull    time.Time
	lastClaim   time.Time
	lastPrune   time.Time
	lastReap    time.Time
	stats       DispatchStats
	errorLog    throttle.Throttle // at most one store-error line a minute
}

// NewDispatcher makes a dispatcher over out.
func NewDispatcher(out Outbox, o DispatcherOptions) (*Dispatcher, error) {
	if o.Guard == nil || o.Sealer == nil {
		return nil, errors.New("webhook dispatcher: Guard and Sealer are required")
	}
	if o.Timeout <= 0 {
		o.Timeout = defaults.WebhookTimeout
	}
	if len(o.RetrySchedule) == 0 {
		o.RetrySchedule = defaults.WebhookRetrySchedule()
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
	}
	if o.MaxPerTenant <= 0 || o.MaxPerTenant > o.Concurrency {
		o.MaxPerTenant = max(1, o.Concurrency/2)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 500 * time.Millisecond
	}
	if o.ClaimIdle <= 0 {
		o.ClaimIdle = o.Timeout + 5*time.Second
	}
	if o.RegistryInterval <= 0 {
		o.RegistryInterval = 2 * time.Second
	}
	if o.BodyLimit <= 0 {
		o.BodyLimit = 4096
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Consumer == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Consumer = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Guard.DialTimeout <= 0 || o.Guard.DialTimeout > o.Timeout {
		g := *o.Guard
		g.DialTimeout = o.Timeout
		o.Guard = &g
	}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would hide the address the guard must check
		DialContext:           o.Guard.DialContext,
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConns:          2 * o.Concurrency,
		MaxIdleConnsPerHost:   o.Concurrency,
		IdleConnTimeout:       60 * time.Second,
		DisableCompression:    true,
	}
	client := &http.Client{Transport: tr, Timeout: o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Dispatcher{out: out, o: o, client: client, sem: make(chan struct{}, o.Concurrency),
		wake: make(chan struct{}, 1), known: map[domain.ShardName]bool{}, dirty: map[domain.ShardName]bool{}, busy: map[domain.ShardName]int{},
		backlog: map[domain.ShardName]bool{}}, nil
}

// Options are the dispatcher's options, defaults applied.
func (d *Dispatcher) Options() DispatcherOptions { return d.o }

// Stats returns a copy of the counters.
func (d *Dispatcher) Stats() DispatchStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Nudge tells the dispatcher that tenant's outbox may have grown (a write in
// this process: store.OnOutbox), so that it reads it now rather than at the next
// poll. Tenants without endpoints are ignored. It never blocks.
func (d *Dispatcher) Nudge(tenant domain.ShardName) {
	if w := d.watched.Load(); w == nil || !(*w)[tenant] {
		return
	}
	d.mu.Lock()
	if !d.known[tenant] {
		d.mu.Unlock()
		return
	}
	d.dirty[tenant] = true
	d.mu.Unlock()
	d.poke()
}

// Watch starts watching tenant at once (an endpoint was registered in this
// process), before the next registry read finds it.
func (d *Dispatcher) Watch(tenant string) {
	name := domain.ShardName(tenant) // its shard 0's
	d.mu.Lock()
	if _, ok := d.known[name]; !ok {
		d.known[name] = true
		d.active = append(d.active, name)
		d.publishKnown()
	}
	d.mu.Unlock()
}

// publishKnown copies known for Nudge; d.mu is held.
func (d *Dispatcher) publishKnown() {
	w := make(map[domain.ShardName]bool, len(d.known))
	for t, active := range d.known {
		if active {
			w[t] = true
		}
	}
	d.watched.Store(&w)
}

func (d *Dispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx is done, then waits for the attempts in flight
// (each bounded by Timeout) so that they are settled rather than left to be
// taken over.
func (d *Dispatcher) Run(ctx context.Context) {
	base := context.WithoutCancel(ctx)
	defer d.inflight.Wait()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
		}
		t.Reset(d.step(ctx, base))
	}
}

// step reads what there is to send and starts the attempts; it returns how long
// to wait before the next step when nothing wakes the loop earlier.
//
// A full step (every PollInterval) walks every active tenant: new messages,
// messages of dead replicas, due retries. In between, a step reads only the
// dirty tenants: those this process wrote to (Nudge), and those with a backlog
// (a read got all it asked for) whose attempts finish and so make room.
func (d *Dispatcher) step(ctx, base context.Context) time.Duration {
	now := d.o.Now()
	d.mu.Lock()
	refresh := d.lastRefresh.IsZero() || now.Sub(d.lastRefresh) >= d.o.RegistryInterval
	d.mu.Unlock()
	if refresh {
		d.refresh(ctx, now)
	}

	d.mu.Lock()
	full := now.Sub(d.lastFull) >= d.o.PollInterval
	var tenants []domain.ShardName
	if full {
		tenants = d.rotated()
		d.lastFull = now
		for _, t := range tenants {
			delete(d.dirty, t)
		}
	}
	for t := range d.dirty { // inactive (frozen, unknown) tenants' entries are dropped
		if d.known[t] {
			tenants = append(tenants, t)
		}
	}
	clear(d.dirty)
	claim := full && now.Sub(d.lastClaim) >= min(time.Second, d.o.ClaimIdle/4)
	if claim {
		d.lastClaim = now
	}
	d.mu.Unlock()

	free := cap(d.sem) - len(d.sem)
	read := 0
	if len(tenants) > 0 {
		read = d.readNew(ctx, base, tenants, free)
	}
	tenants = d.withRoom(tenants)
	if claim && free-read > 0 && len(tenants) > 0 {
		stale, err := d.out.ClaimStaleOutbox(ctx, tenants, d.o.Consumer, d.o.ClaimIdle, free-read)
		d.storeError(err)
		read += d.start(base, stale)
	}
	if full && free-read > 0 && len(tenants) > 0 {
		retries, err := d.out.ClaimWebhookRetries(ctx, tenants, now, now.Add(d.o.ClaimIdle), free-read)
		d.storeError(err)
		read += d.start(base, retries)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.sem) < cap(d.sem) {
		for t := range d.dirty {
			if d.busy[t] < d.o.MaxPerTenant {
				return time.Millisecond // a backlog and room for it: go on at once
			}
		}
	}
	return max(d.o.PollInterval-d.o.Now().Sub(d.lastFull), time.Millisecond)
}

// readNew reads new messages of tenants, a few tenants per round trip, until
// they are all asked or free messages were read. Each tenant is asked for no
// more than its room under MaxPerTenant, and a round trip for no more than the
// free slots left, so that every message read has a slot at once (its idle
// time, which decides when another replica takes it over, starts at the read).
// A tenant that gave all it was asked for has a backlog; it and the tenants
// left unasked for want of slots are marked dirty, to be read again as soon as
// there is room.
func (d *Dispatcher) readNew(ctx, base context.Context, tenants []domain.ShardName, free int) int {
	read := 0
	for len(tenants) > 0 {
		left := free - read
		if left <= 0 {
			d.mu.Lock()
			for _, t := range tenants {
				d.dirty[t] = true
			}
			d.mu.Unlock()
			break
		}
		want := map[domain.ShardName]int{}
		d.mu.Lock()
		for len(tenants) > 0 && len(want) < min(readChunk, left) {
			t := tenants[0]
			tenants = tenants[1:]
			if room := d.o.MaxPerTenant - d.busy[t]; room > 0 {
				want[t] = room
			} else if d.backlog[t] {
				d.dirty[t] = true
			}
		}
		d.mu.Unlock()
		if len(want) == 0 {
			continue
		}
		each := left / len(want)
		for t, room := range want {
			want[t] = min(room, each)
		}
		msgs, err := d.out.ReadOutbox(ctx, d.o.Consumer, want)
		d.storeError(err)
		read += d.start(base, msgs)
		if err != nil {
			break
		}
		got := map[domain.ShardName]int{}
		for _, m := range msgs {
			got[m.Queue()]++
		}
		d.mu.Lock()
		for t, n := range want {
			if got[t] >= n {
				d.backlog[t], d.dirty[t] = true, true
			} else {
				delete(d.backlog, t)
			}
		}
		d.mu.Unlock()
	}
	return read
}

// readChunk is how many tenants one read asks at most (one pipelined round trip).
const readChunk = 12

// withRoom is tenants without those that have MaxPerTenant attempts in flight.
func (d *Dispatcher) withRoom(tenants []domain.ShardName) []domain.ShardName {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := tenants[:0:0]
	for _, t := range tenants {
		if d.busy[t] < d.o.MaxPerTenant {
			out = append(out, t)
		}
	}
	return out
}

// rotated is the active tenants starting at a moving offset, so that with more
// tenants than free slots none waits behind the others for ever.
func (d *Dispatcher) rotated() []domain.ShardName {
	n := len(d.active)
	if n == 0 {
		return nil
	}
	d.rot = (d.rot + 1) % n
	out := make([]domain.ShardName, 0, n)
	out = append(out, d.active[d.rot:]...)
	return append(out, d.active[:d.rot]...)
}

// refresh re-reads the registry; now and then it also prunes tenants left
// without endpoints and removes consumers of replicas that are gone.
func (d *Dispatcher) refresh(ctx context.Context, now time.Time) {
	ts, err := d.out.WebhookTenants(ctx)
	d.mu.Lock()
	d.lastRefresh = now
	if err != nil {
		d.mu.Unlock()
		d.storeError(err)
		return
	}
	known := make(map[domain.ShardName]bool, len(ts))
	active := make([]domain.ShardName, 0, len(ts))
	var empty, all []domain.ShardName
	for _, t := range ts {
		known[t.Name] = !t.Frozen
		all = append(all, t.Name)
		if !t.Frozen {
			active = append(active, t.Name)
		}
		if t.Endpoints == 0 {
			empty = append(empty, t.Name)
		}
	}
	d.known, d.active = known, active
	d.publishKnown()
	prune := now.Sub(d.lastPrune) >= time.Minute
	if prune {
		d.lastPrune = now
	}
	reap := now.Sub(d.lastReap) >= 10*time.Minute
	if reap {
		d.lastReap = now
	}
	d.mu.Unlock()
	if prune {
		for _, t := range empty {
			_, err := d.out.PruneWebhookTenant(ctx, t)
			d.storeError(err)
		}
	}
	if reap {
		for _, t := range all {
			_, err := d.out.ReapWebhookConsumers(ctx, t, d.o.Consumer, time.Hour)
			d.storeError(err)
		}
	}
}

// start begins one attempt per message; there is a free slot for each (the
// reads ask for at most the free slots).
func (d *Dispatcher) start(base context.Context, msgs []domain.WebhookMessage) int {
	for _, m := range msgs {
		d.sem <- struct{}{}
		d.inflight.Add(1)
		// counted per outbox: a tenant's own, or one of its shards'
		q := m.Queue()
		d.mu.Lock()
		d.busy[q]++
		d.mu.Unlock()
		go func() {
			defer func() {
				<-d.sem
				d.mu.Lock()
				if d.busy[q]--; d.busy[q] <= 0 {
					delete(d.busy, q)
				}
				if d.backlog[q] {
					d.dirty[q] = true
				}
				wake := len(d.dirty) > 0
				d.mu.Unlock()
				d.inflight.Done()
				if wake { // room for a backlog: wakes coalesce while a step runs
					d.poke()
				}
			}()
			d.attempt(base, m)
		}()
	}
	return len(msgs)
}

// payload is the body of a delivery (Standard Webhooks).
type payload struct {
	Type      domain.WebhookEvent `json:"type"`
	Timestamp domain.Time         `json:"timestamp"`
	Data      *domain.Request     `json:"data"`
}

// attempt sends one message once and settles the outcome.
func (d *Dispatcher) attempt(ctx context.Context, m domain.WebhookMessage) {
	ep, err := d.out.Webhook(ctx, domain.Call{Tenant: m.Tenant}, m.EndpointID)
	if domain.ErrorCode(err) == domain.NotFound {
		d.count(func(s *DispatchStats) { s.Dropped++ })
		d.storeError(d.out.SettleWebhook(ctx, m, domain.WebhookSettlement{Done: true}))
		return
	}
	if err != nil {
		// Left as it is: pending in the group, or leased in the retry zset, it is
		// taken over after ClaimIdle.
		d.storeError(err)
		return
	}
	start := d.o.Now()
	sctx, end := ctx, func(int, string) {}
	if t := d.o.Tracer; t != nil {
		host := ""
		if u, err := url.Parse(ep.URL); err == nil {
			host = u.Hostname()
		}
		sctx, end = t.StartDelivery(ctx, m.Request.TraceContext, m.Request.ID, string(m.Event), host, m.Attempt)
	}
	status, failure := d.send(sctx, ep, m, start)
	end(status, failure)
	took := d.o.Now().Sub(start)

	rec := &domain.WebhookDelivery{MessageID: m.ID, EventType: m.Event, RequestID: m.Request.ID, Attempt: m.Attempt,
		At: domain.Time{Time: start.UTC().Truncate(time.Millisecond)}, DurationMs: took.Milliseconds(), Error: failure}
	if status > 0 {
		rec.HTTPStatus = &status
	}
	var set domain.WebhookSettlement
	switch {
	case failure == "":
		rec.State = domain.DeliveryDelivered
		set = domain.WebhookSettlement{Log: rec, Done: true}
		d.count(func(s *DispatchStats) { s.Attempts++; s.Delivered++ })
	case m.Attempt <= len(d.o.RetrySchedule):
		next := d.o.Now().Add(d.o.RetrySchedule[m.Attempt-1])
		rec.State = domain.DeliveryRetrying
		rec.NextAttemptAt = &domain.Time{Time: next.UTC().Truncate(time.Millisecond)}
		set = domain.WebhookSettlement{Log: rec, NextAttempt: next}
		d.count(func(s *DispatchStats) { s.Attempts++; s.Retrying++ })
	default:
		rec.State = domain.DeliveryFailed
		set = domain.WebhookSettlement{Log: rec}
		d.count(func(s *DispatchStats) { s.Attempts++; s.Failed++ })
		d.o.Log.Info("webhook message failed after its last attempt", "tenant", m.Tenant, "endpoint", m.EndpointID,
			"message_id", m.ID, "attempts", m.Attempt, "error", failure)
	}
	d.storeError(d.out.SettleWebhook(ctx, m, set))
}

// send makes one HTTP attempt. It returns the receiver's status (0 when none
// came) and "" on success, else why it failed.
func (d *Dispatcher) send(ctx context.Context, ep *domain.Webhook, m domain.WebhookMessage, at time.Time) (int, string) {
	secret, err := d.o.Sealer.Open(m.Tenant, ep.ID, ep.SealedSecret)
	if err != nil {
		return 0, err.Error()
	}
	key, err := SecretKey(secret)
	if err != nil {
		return 0, err.Error()
	}
	body, err := json.Marshal(payload{Type: m.Event, Timestamp: domain.Time{Time: m.At}, Data: m.Request})
	if err != nil {
		return 0, "could not encode the message"
	}
	ts := at.Unix()
	ctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "invalid endpoint URL"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "asyncstatus-webhooks/1")
	req.Header.Set("webhook-id", m.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(key, m.ID, ts, body))
	if t := d.o.Tracer; t != nil {
		t.Inject(ctx, req.Header)
	}
	res, err := d.client.Do(req)
	if err != nil {
		return 0, describe(err, d.o.Timeout)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, d.o.BodyLimit))
	_ = res.Body.Close()
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return res.StatusCode, ""
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return res.StatusCode, "redirects are not followed"
	}
	return res.StatusCode, fmt.Sprintf("receiver answered %d", res.StatusCode)
}

// describe words a failed attempt for the deliveries listing: short, and
// without anything about the service's own network.
func describe(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var te interface{ Timeout() bool }
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		return "the endpoint resolves to an address that is not allowed (loopback, private, link-local or otherwise internal)"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &te) && te.Timeout():
		return fmt.Sprintf("no answer within %s", timeout)
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return msg
}

func (d *Dispatcher) count(f func(*DispatchStats)) {
	d.mu.Lock()
	f(&d.stats)
	d.mu.Unlock()
}

// storeError counts a failed store call and logs it, at most once a minute:
// while Redis is away the dispatcher keeps polling quietly, and the messages
// wait in Redis.
func (d *Dispatcher) storeError(err error) {
	if err == nil {
		return
	}
	d.mu.Lock()
	d.stats.StoreErrors++
	d.stats.LastStoreError = err.Error()
	d.mu.Unlock()
	ok, n := d.errorLog.Allow(time.Now())
	if !ok {
		return
	}
	d.o.Log.Warn("webhook dispatcher: store call failed; messages wait in Redis and are retried", "err", err,
		"suppressed_since_last_log", n)
}
