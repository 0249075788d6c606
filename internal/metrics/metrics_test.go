package metrics_test

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/asyncstatus/asyncstatus/internal/buildinfo"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
)

func mustNew(t *testing.T) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// scrape serves the registry through the handler, as Prometheus would read it.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d", rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestNewRequiresRegistry(t *testing.T) {
	if _, err := metrics.New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
}

// TestTwoSetsDoNotShare: no package globals, no default registry.
func TestTwoSetsDoNotShare(t *testing.T) {
	a, _ := mustNew(t)
	b, _ := mustNew(t)
	a.BackendUnavailable()
	if strings.Contains(scrape(t, b), "asyncstatus_http_backend_unavailable_total 1") {
		t.Fatal("a count on one set shows in another")
	}
	if !strings.Contains(scrape(t, a), "asyncstatus_http_backend_unavailable_total 1") {
		t.Fatal("the count is missing from its own set")
	}
	n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, "asyncstatus_http_requests_total")
	if err != nil || n != 0 {
		t.Fatalf("default registry holds %d asyncstatus series (%v)", n, err)
	}
}

func TestRequestsByRouteAndClass(t *testing.T) {
	m, reg := mustNew(t)
	r := m.RouteSeries("GET", "/v1/requests/:id")
	r.Observe(200, 2*time.Millisecond)
	r.Observe(304, time.Millisecond)
	r.Observe(429, time.Millisecond)
	r.Observe(404, time.Millisecond)
	m.RouteSeries("GET", metrics.Unmatched).Observe(404, time.Millisecond)
	want := `
# HELP asyncstatus_http_requests_total HTTP answers by method, route pattern and status class.
# TYPE asyncstatus_http_requests_total counter
asyncstatus_http_requests_total{class="2xx",method="GET",route="/v1/requests/:id"} 1
asyncstatus_http_requests_total{class="3xx",method="GET",route="/v1/requests/:id"} 1
asyncstatus_http_requests_total{class="4xx",method="GET",route="/v1/requests/:id"} 2
asyncstatus_http_requests_total{class="4xx",method="GET",route="unmatched"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "asyncstatus_http_requests_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.Registry(), "asyncstatus_http_request_duration_seconds"); n != 4 {
		t.Fatalf("%d latency series, want 4", n)
	}
}

func TestRefusalsAndTransitions(t *testing.T) {
	m, reg := mustNew(t)
	m.Throttled(metrics.ReasonPolledTooEarly)
	m.Throttled(metrics.ReasonPolledTooEarly)
	m.BackendUnavailable()
	m.TransitionCounter(metrics.TransitionComplete, "succeeded").Inc()
	want := `
# HELP asyncstatus_http_throttled_total 429 answers by reason: polled_too_early (pacing) or rate_limited (ratelimit.*).
# TYPE asyncstatus_http_throttled_total counter
asyncstatus_http_throttled_total{reason="polled_too_early"} 2
asyncstatus_http_throttled_total{reason="rate_limited"} 0
# HELP asyncstatus_http_backend_unavailable_total 503 BACKEND_UNAVAILABLE answers: Redis unreachable, slow or refusing writes.
# TYPE asyncstatus_http_backend_unavailable_total counter
asyncstatus_http_backend_unavailable_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "asyncstatus_http_throttled_total", "asyncstatus_http_backend_unavailable_total"); err != nil {
		t.Fatal(err)
	}
	out := scrape(t, m)
	for _, line := range []string{
		`asyncstatus_transitions_total{to="succeeded",transition="complete"} 1`,
		`asyncstatus_transitions_total{to="queued",transition="create"} 0`,
	} {
		if !strings.Contains(out, line) {
			t.Fatalf("missing %s in\n%s", line, out)
		}
	}
	if strings.Contains(out, "sweep_expire") || strings.Contains(out, "asyncstatus_sweeper_") {
		t.Fatal("sweeper series before a sweeper is watched")
	}
	if strings.Contains(out, "asyncstatus_webhook_") {
		t.Fatal("webhook series before a dispatcher is watched")
	}
}

func TestSweeper(t *testing.T) {
	m, reg := mustNew(t)
	last := time.Unix(1_700_000_000, 500_000_000)
	m.WatchSweeper(func() metrics.SweepStats {
		return metrics.SweepStats{Runs: 7, Errors: 1, Expired: 3, Failed: 2, Cleaned: 11,
			LastRun: last, LastDuration: 40 * time.Millisecond, LastLag: 1500 * time.Millisecond}
	})
	m.TransitionCounter(metrics.TransitionFail, "failed").Inc()
	want := `
# HELP asyncstatus_sweeper_runs_total Sweeper ticks of this process.
# TYPE asyncstatus_sweeper_runs_total counter
asyncstatus_sweeper_runs_total 7
# HELP asyncstatus_sweeper_errors_total Sweeper ticks that failed (Redis down or slow).
# TYPE asyncstatus_sweeper_errors_total counter
asyncstatus_sweeper_errors_total 1
# HELP asyncstatus_sweeper_cleaned_total Records past their retention whose index entries the sweeper removed.
# TYPE asyncstatus_sweeper_cleaned_total counter
asyncstatus_sweeper_cleaned_total 11
# HELP asyncstatus_sweeper_lag_seconds How overdue the oldest due entry of the last tick was; 0 when nothing was due. Growing: the sweeper does not keep up.
# TYPE asyncstatus_sweeper_lag_seconds gauge
asyncstatus_sweeper_lag_seconds 1.5
# HELP asyncstatus_sweeper_last_run_timestamp_seconds Unix time when the last tick started; 0 before the first.
# TYPE asyncstatus_sweeper_last_run_timestamp_seconds gauge
asyncstatus_sweeper_last_run_timestamp_seconds 1.7000000005e+09
# HELP asyncstatus_sweeper_last_duration_seconds How long the last tick took.
# TYPE asyncstatus_sweeper_last_duration_seconds gauge
asyncstatus_sweeper_last_duration_seconds 0.04
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "asyncstatus_sweeper_runs_total", "asyncstatus_sweeper_errors_total",
		"asyncstatus_sweeper_cleaned_total", "asyncstatus_sweeper_lag_seconds", "asyncstatus_sweeper_last_run_timestamp_seconds",
		"asyncstatus_sweeper_last_duration_seconds"); err != nil {
		t.Fatal(err)
	}
	out := scrape(t, m)
	for _, line := range []string{
		`asyncstatus_transitions_total{to="expired",transition="sweep_expire"} 3`,
		`asyncstatus_transitions_total{to="failed",transition="sweep_timeout"} 2`,
		`asyncstatus_transitions_total{to="failed",transition="fail"} 1`,
	} {
		if !strings.Contains(out, line) {
			t.Fatalf("missing %s in\n%s", line, out)
		}
	}
}

func TestScriptsEmbeddedBuildInfo(t *testing.T) {
	m, _ := mustNew(t)
	m.ObserveScript("poll", 3*time.Millisecond, nil)
	m.ObserveScript("poll", time.Second, errors.New("i/o timeout"))
	m.SetEmbedded(true)
	m.SetBuildInfo(buildinfo.Info{Version: "1.2.3", Revision: "4d44921a", Modified: true, GoVersion: "go1.26.8"})
	out := scrape(t, m)
	for _, line := range []string{
		`asyncstatus_redis_script_duration_seconds_count{result="ok",script="poll"} 1`,
		`asyncstatus_redis_script_duration_seconds_count{result="error",script="poll"} 1`,
		`asyncstatus_embedded_store 1`,
		`asyncstatus_build_info{goversion="go1.26.8",modified="true",revision="4d44921a",version="1.2.3"} 1`,
	} {
		if !strings.Contains(out, line) {
			t.Fatalf("missing %s in\n%s", line, out)
		}
	}
	if strings.Contains(out, `version="dev"`) {
		t.Fatal("SetBuildInfo left the previous version behind")
	}
}

// TestNilIsANoOp: callers hold a nil *Metrics when metrics are off.
func TestNilIsANoOp(t *testing.T) {
	var m *metrics.Metrics
	m.RouteSeries("GET", "/healthz").Observe(200, time.Millisecond)
	if m.TransitionCounter(metrics.TransitionCreate, "queued") != nil {
		t.Error("a nil set has a transition counter")
	}
	m.Throttled(metrics.ReasonRateLimited)
	m.BackendUnavailable()
	m.ObserveScript("poll", time.Millisecond, nil)
	m.SetEmbedded(true)
	m.SetBuildInfo(buildinfo.Info{Version: "x"})
	m.WatchSweeper(nil)
	if out := scrape(t, m); strings.Contains(out, "asyncstatus_") {
		t.Fatalf("a nil set served %s", out)
	}
}

// BenchmarkObserveScript is the cost the store's script observer adds to a call.
func BenchmarkObserveScript(b *testing.B) {
	m, _ := metrics.New(prometheus.NewRegistry())
	b.ReportAllocs()
	for range b.N {
		m.ObserveScript("poll", 700*time.Microsecond, nil)
	}
}

func TestWebhooks(t *testing.T) {
	m, reg := mustNew(t)
	var n int64
	m.WatchWebhooks(func() metrics.WebhookStats {
		n++ // read at every scrape
		return metrics.WebhookStats{Attempts: 9 + n, Delivered: 5 + n, Retrying: 3, Failed: 1, Dropped: 2, StoreErrors: 4}
	})
	want := `
# HELP asyncstatus_webhook_attempts_total Webhook delivery attempts of this process by result: delivered (2xx), retrying (failed, retry scheduled), failed (failed after the last retry step).
# TYPE asyncstatus_webhook_attempts_total counter
asyncstatus_webhook_attempts_total{result="delivered"} 6
asyncstatus_webhook_attempts_total{result="failed"} 1
asyncstatus_webhook_attempts_total{result="retrying"} 3
# HELP asyncstatus_webhook_dropped_total Webhook messages dropped because their endpoint was deleted.
# TYPE asyncstatus_webhook_dropped_total counter
asyncstatus_webhook_dropped_total 2
# HELP asyncstatus_webhook_store_errors_total Failed store calls of the webhook dispatcher (Redis down or slow).
# TYPE asyncstatus_webhook_store_errors_total counter
asyncstatus_webhook_store_errors_total 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "asyncstatus_webhook_attempts_total",
		"asyncstatus_webhook_dropped_total", "asyncstatus_webhook_store_errors_total"); err != nil {
		t.Fatal(err)
	}
	if out := scrape(t, m); !strings.Contains(out, `asyncstatus_webhook_attempts_total{result="delivered"} 7`) {
		t.Fatalf("stats not read again at the second scrape:\n%s", out)
	}
	// Bounded cardinality: only the fixed result label, whatever the stats say.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "asyncstatus_webhook_") {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() != "result" {
					t.Fatalf("%s has label %s", mf.GetName(), l.GetName())
				}
			}
		}
	}
	m.WatchWebhooks(nil)
	if out := scrape(t, m); strings.Contains(out, "asyncstatus_webhook_") {
		t.Fatal("webhook series after the source was removed")
	}
}

// TestRouteSeries: every RouteSeries of one route counts into the same series,
// and a class's series is made only on its first answer.
func TestRouteSeries(t *testing.T) {
	m, _ := metrics.New(prometheus.NewRegistry())
	r := m.RouteSeries("GET", "/v1/requests/:id")
	r.Observe(200, time.Millisecond)
	r.Observe(204, time.Millisecond)
	m.RouteSeries("GET", "/v1/requests/:id").Observe(200, time.Millisecond)
	r.Observe(700, time.Millisecond)
	out := scrape(t, m)
	for _, want := range []string{
		`asyncstatus_http_requests_total{class="2xx",method="GET",route="/v1/requests/:id"} 3`,
		`asyncstatus_http_requests_total{class="other",method="GET",route="/v1/requests/:id"} 1`,
		`asyncstatus_http_request_duration_seconds_count{class="2xx",method="GET",route="/v1/requests/:id"} 3`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, `class="4xx"`) || strings.Contains(out, `class="5xx"`) {
		t.Errorf("a class with no answer has a series:\n%s", out)
	}
	var nilM *metrics.Metrics
	nilM.RouteSeries("GET", "/x").Observe(200, time.Millisecond) // does nothing
	if nilM.TransitionCounter("create", "queued") != nil {
		t.Error("a nil set has a transition counter")
	}
}

// BenchmarkRouteSeries is the metrics cost of one HTTP answer through a kept
// RouteSeries, on every core at once (as a busy server calls it).
func BenchmarkRouteSeries(b *testing.B) {
	m, _ := metrics.New(prometheus.NewRegistry())
	r := m.RouteSeries("GET", "/v1/requests/:id")
	b.Run("RouteSeries", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.Observe(200, 1500*time.Microsecond)
			}
		})
	})
}

// TestRateLimiter: the limiter's fail-opens and errors are on /metrics once a
// limiter is watched.
func TestRateLimiter(t *testing.T) {
	m, reg := mustNew(t)
	if strings.Contains(scrape(t, m), "asyncstatus_ratelimit_") {
		t.Fatal("rate limiter series before a limiter is watched")
	}
	m.WatchRateLimiter(func() metrics.RateLimitStats { return metrics.RateLimitStats{FailedOpen: 1873, Errors: 4} })
	want := `
# HELP asyncstatus_ratelimit_failed_open_total Calls the rate limiter let through uncounted because Redis failed or was slower than ratelimit.timeout (reads only).
# TYPE asyncstatus_ratelimit_failed_open_total counter
asyncstatus_ratelimit_failed_open_total 1873
# HELP asyncstatus_ratelimit_errors_total Calls refused with 503 because the rate limiter could not count them (Redis failed or was slower than ratelimit.timeout; writes and admin calls).
# TYPE asyncstatus_ratelimit_errors_total counter
asyncstatus_ratelimit_errors_total 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "asyncstatus_ratelimit_failed_open_total", "asyncstatus_ratelimit_errors_total"); err != nil {
		t.Fatal(err)
	}
}
