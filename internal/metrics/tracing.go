package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchTracing makes every scrape read the tracing exporter's counters
// (docs/reference.md §17): spans dropped (a full queue, a collector that did
// not take a batch) and spans exported. serve calls it only when tracing is
// on, so the series exist only then.
func (m *Metrics) WatchTracing(dropped, exported func() int64) {
	if m == nil {
		return
	}
	_ = register(m.reg,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Subsystem: "tracing", Name: "spans_dropped_total",
			Help: "Spans not exported: the export queue was full or the collector did not take their batch."},
			func() float64 { return float64(dropped()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Subsystem: "tracing", Name: "spans_exported_total",
			Help: "Spans the OTLP collector took."},
			func() float64 { return float64(exported()) }))
}
