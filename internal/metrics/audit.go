package metrics

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// AuditStats is what the audit drainer reports, read at every scrape. It
// mirrors audit.Stats so that this package need not import the audit package.
type AuditStats struct {
	// Written lines, SinkErrors refused batches, Dropped events reported as not
	// recorded (a backlog at its bound), StoreErrors failed Redis calls.
	Written, SinkErrors, Dropped, StoreErrors int64
	// Backlog: entries waiting in Redis for the sink, over all tenants;
	// BacklogMax the largest tenant's; Bound the bound per tenant.
	Backlog, BacklogMax, Bound int64
	// SinkUp is false while the sink refuses lines.
	SinkUp bool
}

var (
	auditWritten = prometheus.NewDesc(namespace+"_audit_written_total",
		"Audit lines this process wrote to its sink (events, and reports of dropped events).", nil, nil)
	auditSinkErrors = prometheus.NewDesc(namespace+"_audit_sink_errors_total",
		"Batches of audit lines the sink refused (they wait in Redis and are offered again).", nil, nil)
	auditDropped = prometheus.NewDesc(namespace+"_audit_dropped_total",
		"Audit events not recorded because their tenant's backlog was at audit.max_backlog, as reported by this process.", nil, nil)
	auditStoreErrors = prometheus.NewDesc(namespace+"_audit_store_errors_total",
		"Failed Redis calls of the audit drainer.", nil, nil)
	auditBacklog = prometheus.NewDesc(namespace+"_audit_backlog",
		"Audit entries waiting in Redis for a sink, over all tenants (counted every few seconds).", nil, nil)
	auditBacklogMax = prometheus.NewDesc(namespace+"_audit_backlog_max_tenant",
		"The largest tenant's audit backlog: at audit_backlog_limit, events are dropped (and counted).", nil, nil)
	auditBacklogLimit = prometheus.NewDesc(namespace+"_audit_backlog_limit",
		"audit.max_backlog: the audit entries one tenant's backlog may hold.", nil, nil)
	auditSinkUp = prometheus.NewDesc(namespace+"_audit_sink_up",
		"1 while the audit sink takes lines, 0 while it refuses them.", nil, nil)
)

// auditCollector serves the audit_* metrics from the watched stats.
type auditCollector struct {
	mu    sync.Mutex
	stats func() AuditStats
}

// WatchAudit makes every scrape read stats: the audit_* metrics. Calling it
// again replaces the source; nil stops them.
func (m *Metrics) WatchAudit(stats func() AuditStats) {
	if m == nil {
		return
	}
	c := &auditCollector{}
	if err := m.reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return
		}
		c = are.ExistingCollector.(*auditCollector)
	}
	c.mu.Lock()
	c.stats = stats
	c.mu.Unlock()
}

func (c *auditCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{auditWritten, auditSinkErrors, auditDropped, auditStoreErrors,
		auditBacklog, auditBacklogMax, auditBacklogLimit, auditSinkUp} {
		ch <- d
	}
}

func (c *auditCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.stats
	c.mu.Unlock()
	if f == nil {
		return
	}
	s := f()
	up := 0.0
	if s.SinkUp {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(auditWritten, prometheus.CounterValue, float64(s.Written))
	ch <- prometheus.MustNewConstMetric(auditSinkErrors, prometheus.CounterValue, float64(s.SinkErrors))
	ch <- prometheus.MustNewConstMetric(auditDropped, prometheus.CounterValue, float64(s.Dropped))
	ch <- prometheus.MustNewConstMetric(auditStoreErrors, prometheus.CounterValue, float64(s.StoreErrors))
	ch <- prometheus.MustNewConstMetric(auditBacklog, prometheus.GaugeValue, float64(s.Backlog))
	ch <- prometheus.MustNewConstMetric(auditBacklogMax, prometheus.GaugeValue, float64(s.BacklogMax))
	ch <- prometheus.MustNewConstMetric(auditBacklogLimit, prometheus.GaugeValue, float64(s.Bound))
	ch <- prometheus.MustNewConstMetric(auditSinkUp, prometheus.GaugeValue, up)
}
