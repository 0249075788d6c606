package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Wake-up latency buckets, seconds: a wake-up is a read of Redis after an
// announcement, about a millisecond; the contract's bound is 100 ms.
var wakeBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

// waitMetrics are the figures of waiting without polling (docs/reference.md §12).
type waitMetrics struct {
	held, streams prometheus.Gauge
	wakeups       prometheus.Counter
	latency       prometheus.Histogram
	capped        prometheus.Counter
}

func (m *Metrics) registerWait(reg *prometheus.Registry) error {
	w := &m.wait
	w.held = newGauge("wait", "long_polls_held", "Long polls (Prefer: wait) this replica holds now.")
	w.streams = newGauge("wait", "streams_open", "Event streams (GET /v1/requests/{id}/stream) this replica holds open now.")
	w.wakeups = newCounter("wait", "wakeups_total", "Waiters (long polls and streams) handed a fresh read because their request changed.")
	w.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "wait", Name: "wakeup_seconds",
		Help:    "Time from an announcement reaching this replica to its waiters holding the re-read state, per re-read.",
		Buckets: wakeBuckets,
	})
	w.capped = newCounter("wait", "capped_total",
		"Long polls answered at once as ordinary polls (and streams ended after one event) because wait.max_waiters were held.")
	return register(reg, w.held, w.streams, w.wakeups, w.latency, w.capped)
}

// LongPollHeld adds delta (+1 when a long poll starts waiting, -1 when it ends).
func (m *Metrics) LongPollHeld(delta int) {
	if m != nil {
		m.wait.held.Add(float64(delta))
	}
}

// StreamOpen adds delta to the open event streams.
func (m *Metrics) StreamOpen(delta int) {
	if m != nil {
		m.wait.streams.Add(float64(delta))
	}
}

// WaitCapped counts a wait refused because wait.max_waiters were held.
func (m *Metrics) WaitCapped() {
	if m != nil {
		m.wait.capped.Inc()
	}
}

// Woke records one re-read of the notification hub that reached waiters
// waiters d after the announcement; it satisfies store.HubObserver.
func (m *Metrics) Woke(waiters int, d time.Duration) {
	if m == nil || waiters == 0 {
		return
	}
	m.wait.wakeups.Add(float64(waiters))
	m.wait.latency.Observe(d.Seconds())
}
