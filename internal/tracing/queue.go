package tracing

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/asyncstatus/asyncstatus/internal/throttle"
)

// queue is the span processor between the API's answers and the exporter: a
// bounded channel that OnEnd never waits on, and one goroutine that sends
// batches. A collector that is down or slow only fills the channel; the spans
// that do not fit, and those of a batch the exporter failed to send, are
// dropped and counted (reference §17). The SDK's BatchSpanProcessor drops too
// when full, but does not say how many, and retries a failed batch while more
// wait; here a failed batch is dropped at once, so memory stays bounded by
// the channel whatever the collector does.
type queue struct {
	exp     sdktrace.SpanExporter
	ch      chan sdktrace.ReadOnlySpan
	batch   int
	every   time.Duration
	timeout time.Duration
	log     *slog.Logger

	dropped, exported atomic.Int64
	warn              throttle.Throttle

	flushReq chan chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func newQueue(exp sdktrace.SpanExporter, o Options) *queue {
	q := &queue{exp: exp, ch: make(chan sdktrace.ReadOnlySpan, o.QueueSize), batch: o.BatchSize,
		every: o.BatchInterval, timeout: o.ExportTimeout, log: o.Log, warn: throttle.Throttle{Every: time.Minute},
		flushReq: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// OnStart does nothing: spans are looked at only when they end.
func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, or drops it when the queue is full. It never
// blocks: it runs on the answer's path.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case q.ch <- s:
	default:
		q.drop(1, "the export queue is full (the collector is slow or down)", nil)
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

func (q *queue) run() {
	defer close(q.done)
	t := time.NewTicker(q.every)
	defer t.Stop()
	buf := make([]sdktrace.ReadOnlySpan, 0, q.batch)
	send := func() {
		if len(buf) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
		err := q.exp.ExportSpans(ctx, buf)
		cancel()
		if err != nil {
			q.drop(len(buf), "the collector did not take a batch", err)
		} else {
			q.exported.Add(int64(len(buf)))
		}
		clear(buf)
		buf = buf[:0]
	}
	drain := func() {
		for {
			select {
			case s := <-q.ch:
				buf = append(buf, s)
				if len(buf) == q.batch {
					send()
				}
			default:
				send()
				return
			}
		}
	}
	for {
		select {
		case s := <-q.ch:
			buf = append(buf, s)
			if len(buf) == q.batch {
				send()
			}
		case <-t.C:
			send()
		case r := <-q.flushReq:
			drain()
			close(r)
		case <-q.stop:
			drain()
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
