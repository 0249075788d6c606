package tracing

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/asyncstatus/asyncstatus/internal/throttle"
)

// queue is the span processor between the API's answers and the exporter: a
// bounded buffer that OnEnd never waits on, and one goroutine that sends
// batches. A collector that is down or slow only fills the buffer; the spans
// that do not fit, and those of a batch the exporter failed to send, are
// dropped and counted (reference §17). The SDK's BatchSpanProcessor drops too
// when full, but does not say how many, and retries a failed batch while more
// wait; here a failed batch is dropped at once, so memory stays bounded by
// the queue's size whatever the collector does.
//
// OnEnd appends under a mutex and wakes the sender only when a batch is full:
// a channel send per span would wake the parked sender for nearly every span
// (a futex wake and a thread switch, some µs each on a busy machine, twice per
// traced poll), where this wakes it once per BatchSize spans or BatchInterval.
type queue struct {
	exp     sdktrace.SpanExporter
	size    int
	batch   int
	every   time.Duration
	timeout time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	waiting []sdktrace.ReadOnlySpan // ended spans not yet taken by the sender
	sending int                     // spans taken by the sender and not yet sent
	full    chan struct{}           // a batch waits (capacity 1: one wake-up is enough)

	dropped, exported atomic.Int64
	warn              throttle.Throttle

	flushReq chan chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func newQueue(exp sdktrace.SpanExporter, o Options) *queue {
	q := &queue{exp: exp, size: o.QueueSize, batch: min(o.BatchSize, o.QueueSize), every: o.BatchInterval,
		timeout: o.ExportTimeout, log: o.Log, warn: throttle.Throttle{Every: time.Minute},
		waiting: make([]sdktrace.ReadOnlySpan, 0, o.BatchSize), full: make(chan struct{}, 1),
		flushReq: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// OnStart does nothing: spans are looked at only when they end.
func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, or drops it when the queue is full. It never
// blocks but on the queue's mutex, held only to append or to swap: it runs on
// the answer's path.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	q.mu.Lock()
	if len(q.waiting)+q.sending >= q.size {
		q.mu.Unlock()
		q.drop(1, "the export queue is full (the collector is slow or down)", nil)
		return
	}
	q.waiting = append(q.waiting, s)
	wake := len(q.waiting) == q.batch
	q.mu.Unlock()
	if wake {
		select {
		case q.full <- struct{}{}:
		default:
		}
	}
}

// drop counts n spans as lost, and says so in the log at most once a minute.
func (q *queue) drop(n int, why string, err error) {
	q.dropped.Add(int64(n))
	ok, held := q.warn.Allow(time.Now())
	if !ok {
		return
	}
	attrs := []any{"component", "tracing", "spans", n, "dropped_total", q.dropped.Load()}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	if held > 0 {
		attrs = append(attrs, "suppressed", held)
	}
	q.log.Warn("tracing: spans dropped: "+why, attrs...)
}

// take swaps the waiting spans for spare (an emptied buffer) and counts them
// as being sent.
func (q *queue) take(spare []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.waiting
	q.waiting = spare[:0]
	q.sending = len(out)
	return out
}

// send exports spans in batches of at most q.batch, then frees their places
// in the queue.
func (q *queue) send(spans []sdktrace.ReadOnlySpan) {
	for b := range slices.Chunk(spans, q.batch) {
		ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
		err := q.exp.ExportSpans(ctx, b)
		cancel()
		var rejected *rejectedError
		switch {
		case errors.As(err, &rejected):
			q.exported.Add(int64(len(b)) - rejected.n)
			q.drop(int(rejected.n), "the collector rejected spans", err)
		case err != nil:
			q.drop(len(b), "the collector did not take a batch", err)
		default:
			q.exported.Add(int64(len(b)))
		}
	}
	clear(spans)
	q.mu.Lock()
	q.sending = 0
	q.mu.Unlock()
}

func (q *queue) run() {
	defer close(q.done)
	t := time.NewTicker(q.every)
	defer t.Stop()
	spare := make([]sdktrace.ReadOnlySpan, 0, q.batch)
	flush := func() {
		out := q.take(spare)
		q.send(out)
		spare = out[:0]
	}
	for {
		select {
		case <-q.full:
			flush()
		case <-t.C:
			flush()
		case r := <-q.flushReq:
			flush()
			close(r)
		case <-q.stop:
			flush()
			return
		}
	}
}

// ForceFlush sends what waits, and returns when it is sent or ctx is done.
func (q *queue) ForceFlush(ctx context.Context) error {
	r := make(chan struct{})
	select {
	case q.flushReq <- r:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown sends what waits (bounded by ctx) and stops the exporter.
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return q.exp.Shutdown(ctx)
}
