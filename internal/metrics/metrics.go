package metrics

import (
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/buildinfo"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const namespace = "asyncstatus"

// Reasons of a 429 answer, the values of asyncstatus_http_throttled_total{reason}.
const (
	ReasonPolledTooEarly = "polled_too_early"
	ReasonRateLimited    = "rate_limited"
)

// Transitions, the values of asyncstatus_transitions_total{transition}, and the
// status each one leads to.
const (
	TransitionCreate       = "create"        // -> queued
	TransitionProcessing   = "processing"    // -> processing (a heartbeat included)
	TransitionComplete     = "complete"      // -> succeeded
	TransitionFail         = "fail"          // -> failed
	TransitionCancel       = "cancel"        // -> cancelled
	TransitionSweepExpire  = "sweep_expire"  // -> expired (queued too long)
	TransitionSweepTimeout = "sweep_timeout" // -> failed (no heartbeat)
)

// Unmatched is the route label of answers to paths no route matches: the raw
// path would make the label set unbounded.
const Unmatched = "unmatched"

// HTTP latency buckets, seconds: a poll on a healthy Redis takes about a
// millisecond, redis.op_timeout defaults to 1 s.
var httpBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Redis script latency buckets, seconds.
var scriptBuckets = []float64{0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// classes are the status class label values, by status / 100.
var classes = [...]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

// statusClass is "2xx" for 200..299 and so on; "other" outside 100..599.
func statusClass(status int) string { return classes[classIndex(status)] }

// classIndex is the index of status's class in classes.
func classIndex(status int) int {
	if c := status / 100; c >= 1 && c <= 5 {
		return c
	}
	return 0
}

// SweepStats is what the sweeper reports, read at every scrape. It mirrors
// sweep.Stats so that this package need not import the sweeper (internal/app
// converts one into the other).
type SweepStats struct {
	// Runs counts ticks; Errors the ticks that failed.
	Runs, Errors int64
	// Expired counts queued -> expired, Failed processing -> failed transitions.
	Expired, Failed int64
	// Cleaned counts records whose index entries retention cleanup removed.
	Cleaned int64
	// LastRun is when the last tick started (zero before the first), LastDuration
	// how long it took, LastLag how overdue the oldest due entry it found was.
	LastRun      time.Time
	LastDuration time.Duration
	LastLag      time.Duration
}

// WebhookStats is what the webhook dispatcher reports, read at every scrape. It
// mirrors the dispatcher's own counters (webhook.DispatchStats) so that this
// package need not import the webhook package.
type WebhookStats struct {
	// Attempts made; of them Delivered (2xx), Retrying (failed, another attempt
	// is scheduled) and Failed (failed after the last step of the schedule).
	Attempts, Delivered, Retrying, Failed int64
	// Dropped counts messages whose endpoint was deleted before delivery.
	Dropped int64
	// StoreErrors counts failed store calls of the dispatcher (Redis away).
	StoreErrors int64
}

// Metrics is the set of asyncstatus collectors on one registry.
type Metrics struct {
	reg *prometheus.Registry

	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	transitions *prometheus.CounterVec
	throttled   *prometheus.CounterVec
	unavailable prometheus.Counter
	scripts     *prometheus.HistogramVec
	embedded    prometheus.Gauge
	buildInfo   *prometheus.GaugeVec

	mu    sync.Mutex
	sweep func() SweepStats     // nil until WatchSweeper
	hooks func() WebhookStats   // nil until WatchWebhooks
	rates func() RateLimitStats // nil until WatchRateLimiter

	wait waitMetrics // wait.go

	// The children of the request and script metrics, looked up once per label
	// set: WithLabelValues hashes and validates every value on every call, which
	// is most of the cost on the request path. The label sets are bounded, so
	// are these maps.
	seriesMu sync.RWMutex
	series   map[requestKey]requestSeries
	scriptMu sync.RWMutex
	script   map[[2]string]prometheus.Observer
}

type requestKey struct{ method, route, class string }

type requestSeries struct {
	count prometheus.Counter
	dur   prometheus.Observer
}

// New makes the collectors and registers them on reg.
func New(reg *prometheus.Registry) (*Metrics, error) {
	if reg == nil {
		return nil, fmt.Errorf("metrics: a registry is required")
	}
	m := &Metrics{reg: reg, series: map[requestKey]requestSeries{}, script: map[[2]string]prometheus.Observer{}}
	httpLabels := []string{"method", "route", "class"}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "http", Name: "requests_total",
		Help: "HTTP answers by method, route pattern and status class.",
	}, httpLabels)
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "http", Name: "request_duration_seconds",
		Help:    "Time from the first middleware to the answer written, by method, route pattern and status class.",
		Buckets: httpBuckets,
	}, httpLabels)
	m.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "transitions_total",
		Help: transitionsHelp,
	}, []string{"transition", "to"})
	m.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "http", Name: "throttled_total",
		Help: "429 answers by reason: polled_too_early (pacing) or rate_limited (ratelimit.*).",
	}, []string{"reason"})
	m.unavailable = newCounter("http", "backend_unavailable_total",
		"503 BACKEND_UNAVAILABLE answers: Redis unreachable, slow or refusing writes.")
	m.scripts = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "redis", Name: "script_duration_seconds",
		Help:    "Latency of each Lua script call (EVALSHA, with its EVAL fallback) by script and result (ok or error).",
		Buckets: scriptBuckets,
	}, []string{"script", "result"})
	m.embedded = newGauge("", "embedded_store",
		"1 when serving from the embedded in-process store: data lives only as long as the process.")
	m.buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "Always 1; the labels name the running build.",
	}, []string{"version", "revision", "modified", "goversion"})
	for _, c := range []prometheus.Collector{m.requests, m.duration, &transitionCollector{m}, m.throttled,
		m.unavailable, m.scripts, m.embedded, m.buildInfo, &sweeperCollector{m}, &webhookCollector{m},
		&rateCollector{m}} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	if err := m.registerWait(reg); err != nil {
		return nil, err
	}
	// Series that alerts compare against exist from the start, at zero.
	m.throttled.WithLabelValues(ReasonPolledTooEarly)
	m.throttled.WithLabelValues(ReasonRateLimited)
	for _, t := range []struct {
		transition string
		to         domain.Status
	}{{TransitionCreate, domain.StatusQueued}, {TransitionProcessing, domain.StatusProcessing},
		{TransitionComplete, domain.StatusSucceeded}, {TransitionFail, domain.StatusFailed}, {TransitionCancel, domain.StatusCancelled}} {
		m.transitions.WithLabelValues(t.transition, string(t.to))
	}
	m.SetBuildInfo(buildinfo.Info{Version: "dev", GoVersion: runtime.Version()})
	return m, nil
}

// Registry is the registry the collectors live on (cmd adds the Go and process
// collectors to it).
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the registry in the Prometheus text format; for a nil
// *Metrics, an empty registry.
func (m *Metrics) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	if m != nil {
		reg = m.reg
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// requestSeries is the children of k, made on first use.
func (m *Metrics) requestSeries(k requestKey) requestSeries {
	m.seriesMu.RLock()
	s, ok := m.series[k]
	m.seriesMu.RUnlock()
	if !ok {
		s = requestSeries{m.requests.WithLabelValues(k.method, k.route, k.class), m.duration.WithLabelValues(k.method, k.route, k.class)}
		m.seriesMu.Lock()
		m.series[k] = s
		m.seriesMu.Unlock()
	}
	return s
}

// RouteSeries are the request metrics of one method and route, kept by a
// caller that knows its routes, so that counting an answer loads one pointer
// instead of hashing three labels under a lock. A class's series is still
// made on its first answer, so /metrics lists the same series either way.
type RouteSeries struct {
	m             *Metrics
	method, route string
	class         [len(classes)]atomic.Pointer[requestSeries]
}

// RouteSeries returns the series of method and route, which must be a
// registered route pattern (e.g. /v1/requests/:id) or [Unmatched], never a raw
// path; nil, whose Observe does nothing, for a nil *Metrics.
func (m *Metrics) RouteSeries(method, route string) *RouteSeries {
	if m == nil {
		return nil
	}
	return &RouteSeries{m: m, method: method, route: route}
}

// Observe counts one HTTP answer of status that took d.
func (r *RouteSeries) Observe(status int, d time.Duration) {
	if r == nil {
		return
	}
	i := classIndex(status)
	s := r.class[i].Load()
	if s == nil {
		v := r.m.requestSeries(requestKey{r.method, r.route, classes[i]})
		s = &v
		r.class[i].Store(s)
	}
	s.count.Inc()
	s.dur.Observe(d.Seconds())
}

// TransitionCounter counts the accepted transition calls of one kind leading
// to status to, resolved once (the API's transitions exist from the start, at zero); nil
// for a nil *Metrics.
func (m *Metrics) TransitionCounter(transition, to string) prometheus.Counter {
	if m == nil {
		return nil
	}
	return m.transitions.WithLabelValues(transition, to)
}

// Throttled counts one 429 answer; reason is ReasonPolledTooEarly or ReasonRateLimited.
func (m *Metrics) Throttled(reason string) {
	if m == nil {
		return
	}
	m.throttled.WithLabelValues(reason).Inc()
}

// BackendUnavailable counts one 503 answer.
func (m *Metrics) BackendUnavailable() {
	if m == nil {
		return
	}
	m.unavailable.Inc()
}

// ObserveScript records one Lua script call; it satisfies store.ScriptObserver.
func (m *Metrics) ObserveScript(name string, d time.Duration, err error) {
	if m == nil {
		return
	}
	k := [2]string{name, "ok"}
	if err != nil {
		k[1] = "error"
	}
	m.scriptMu.RLock()
	o, ok := m.script[k]
	m.scriptMu.RUnlock()
	if !ok {
		o = m.scripts.WithLabelValues(k[0], k[1])
		m.scriptMu.Lock()
		m.script[k] = o
		m.scriptMu.Unlock()
	}
	o.Observe(d.Seconds())
}

// SetEmbedded sets the embedded-store gauge.
func (m *Metrics) SetEmbedded(on bool) {
	if m == nil {
		return
	}
	if on {
		m.embedded.Set(1)
	} else {
		m.embedded.Set(0)
	}
}

// SetBuildInfo names the running build: asyncstatus_build_info's labels.
func (m *Metrics) SetBuildInfo(b buildinfo.Info) {
	if m == nil {
		return
	}
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(b.Version, b.Revision, strconv.FormatBool(b.Modified), b.GoVersion).Set(1)
}

// WatchSweeper makes every scrape read stats: the sweeper_* metrics and the
// sweep_* transitions. Calling it again replaces the source.
func (m *Metrics) WatchSweeper(stats func() SweepStats) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.sweep = stats
	m.mu.Unlock()
}

func (m *Metrics) sweepStats() (SweepStats, bool) {
	m.mu.Lock()
	f := m.sweep
	m.mu.Unlock()
	if f == nil {
		return SweepStats{}, false
	}
	return f(), true
}

const transitionsHelp = "Accepted transitions by transition and target status: API calls (idempotent replays included) and the sweeper's timeouts."

// transitionCollector serves asyncstatus_transitions_total: the API's counters
// and, once a sweeper is watched, its timeouts, as one metric.
type transitionCollector struct{ m *Metrics }

var transitionsDesc = prometheus.NewDesc(namespace+"_transitions_total", transitionsHelp, []string{"transition", "to"}, nil)

func (c *transitionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- transitionsDesc }

func (c *transitionCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.transitions.Collect(ch)
	if s, ok := c.m.sweepStats(); ok {
		ch <- prometheus.MustNewConstMetric(transitionsDesc, prometheus.CounterValue, float64(s.Expired), TransitionSweepExpire, string(domain.StatusExpired))
		ch <- prometheus.MustNewConstMetric(transitionsDesc, prometheus.CounterValue, float64(s.Failed), TransitionSweepTimeout, string(domain.StatusFailed))
	}
}

// sweeperCollector serves the sweeper_* metrics from the watched stats.
type sweeperCollector struct{ m *Metrics }

var (
	sweepRuns = prometheus.NewDesc(namespace+"_sweeper_runs_total",
		"Sweeper ticks of this process.", nil, nil)
	sweepErrors = prometheus.NewDesc(namespace+"_sweeper_errors_total",
		"Sweeper ticks that failed (Redis down or slow).", nil, nil)
	sweepCleaned = prometheus.NewDesc(namespace+"_sweeper_cleaned_total",
		"Records past their retention whose index entries the sweeper removed.", nil, nil)
	sweepLag = prometheus.NewDesc(namespace+"_sweeper_lag_seconds",
		"How overdue the oldest due entry of the last tick was; 0 when nothing was due. Growing: the sweeper does not keep up.", nil, nil)
	sweepLastRun = prometheus.NewDesc(namespace+"_sweeper_last_run_timestamp_seconds",
		"Unix time when the last tick started; 0 before the first.", nil, nil)
	sweepLastDuration = prometheus.NewDesc(namespace+"_sweeper_last_duration_seconds",
		"How long the last tick took.", nil, nil)
)

func (c *sweeperCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sweepRuns, sweepErrors, sweepCleaned, sweepLag, sweepLastRun, sweepLastDuration} {
		ch <- d
	}
}

func (c *sweeperCollector) Collect(ch chan<- prometheus.Metric) {
	s, ok := c.m.sweepStats()
	if !ok {
		return
	}
	var last float64
	if !s.LastRun.IsZero() {
		last = float64(s.LastRun.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(sweepRuns, prometheus.CounterValue, float64(s.Runs))
	ch <- prometheus.MustNewConstMetric(sweepErrors, prometheus.CounterValue, float64(s.Errors))
	ch <- prometheus.MustNewConstMetric(sweepCleaned, prometheus.CounterValue, float64(s.Cleaned))
	ch <- prometheus.MustNewConstMetric(sweepLag, prometheus.GaugeValue, s.LastLag.Seconds())
	ch <- prometheus.MustNewConstMetric(sweepLastRun, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(sweepLastDuration, prometheus.GaugeValue, s.LastDuration.Seconds())
}

// WatchWebhooks makes every scrape read stats: the webhook_* metrics. Calling
// it again replaces the source; nil stops them.
func (m *Metrics) WatchWebhooks(stats func() WebhookStats) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.hooks = stats
	m.mu.Unlock()
}

func (m *Metrics) webhookStats() (WebhookStats, bool) {
	m.mu.Lock()
	f := m.hooks
	m.mu.Unlock()
	if f == nil {
		return WebhookStats{}, false
	}
	return f(), true
}

// Results of a webhook delivery attempt (the result label of
// asyncstatus_webhook_attempts_total).
const (
	WebhookDelivered = "delivered" // 2xx within webhooks.timeout
	WebhookRetrying  = "retrying"  // failed; another attempt is scheduled
	WebhookFailed    = "failed"    // failed after the last step: the message is given up
)

// webhookCollector serves the webhook_* metrics from the watched stats. The
// labels are fixed sets: no tenants, endpoints or message ids.
type webhookCollector struct{ m *Metrics }

var (
	hookAttempts = prometheus.NewDesc(namespace+"_webhook_attempts_total",
		"Webhook delivery attempts of this process by result: delivered (2xx), retrying (failed, retry scheduled), failed (failed after the last retry step).",
		[]string{"result"}, nil)
	hookDropped = prometheus.NewDesc(namespace+"_webhook_dropped_total",
		"Webhook messages dropped because their endpoint was deleted.", nil, nil)
	hookErrors = prometheus.NewDesc(namespace+"_webhook_store_errors_total",
		"Failed store calls of the webhook dispatcher (Redis down or slow).", nil, nil)
)

func (c *webhookCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{hookAttempts, hookDropped, hookErrors} {
		ch <- d
	}
}

func (c *webhookCollector) Collect(ch chan<- prometheus.Metric) {
	s, ok := c.m.webhookStats()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(hookAttempts, prometheus.CounterValue, float64(s.Delivered), WebhookDelivered)
	ch <- prometheus.MustNewConstMetric(hookAttempts, prometheus.CounterValue, float64(s.Retrying), WebhookRetrying)
	ch <- prometheus.MustNewConstMetric(hookAttempts, prometheus.CounterValue, float64(s.Failed), WebhookFailed)
	ch <- prometheus.MustNewConstMetric(hookDropped, prometheus.CounterValue, float64(s.Dropped))
	ch <- prometheus.MustNewConstMetric(hookErrors, prometheus.CounterValue, float64(s.StoreErrors))
}
