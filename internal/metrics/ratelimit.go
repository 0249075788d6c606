package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// RateLimitStats is what the HTTP layer's rate limiter (internal/ratelimit)
// reports, read at every scrape; this package does not import it. The calls
// the store's scripts count never fail open: a Redis failure fails the call
// itself (asyncstatus_http_backend_unavailable_total).
type RateLimitStats struct {
	// FailedOpen counts reads let through uncounted because the limiter's
	// store failed or was slower than ratelimit.timeout.
	FailedOpen uint64
	// Errors counts writes and admin calls refused (503) for the same reason.
	Errors uint64
}

var (
	rateFailedOpen = prometheus.NewDesc(namespace+"_ratelimit_failed_open_total",
		"Calls the rate limiter let through uncounted because Redis failed or was slower than ratelimit.timeout (reads only).", nil, nil)
	rateErrors = prometheus.NewDesc(namespace+"_ratelimit_errors_total",
		"Calls refused with 503 because the rate limiter could not count them (Redis failed or was slower than ratelimit.timeout; writes and admin calls).", nil, nil)
)

// WatchRateLimiter makes every scrape read stats: the ratelimit_* metrics.
// Calling it again replaces the source; nil stops them.
func (m *Metrics) WatchRateLimiter(stats func() RateLimitStats) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.rates = stats
	m.mu.Unlock()
}

// rateCollector serves the ratelimit_* metrics from the watched stats.
type rateCollector struct{ m *Metrics }

func (c *rateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rateFailedOpen
	ch <- rateErrors
}

func (c *rateCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	f := c.m.rates
	c.m.mu.Unlock()
	if f == nil {
		return
	}
	s := f()
	ch <- prometheus.MustNewConstMetric(rateFailedOpen, prometheus.CounterValue, float64(s.FailedOpen))
	ch <- prometheus.MustNewConstMetric(rateErrors, prometheus.CounterValue, float64(s.Errors))
}
