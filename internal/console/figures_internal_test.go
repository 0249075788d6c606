package console

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/asyncstatus/asyncstatus/internal/metrics"
)

// TestP99: the estimate interpolates inside the bucket that holds the 99th
// percentile of the answers between two samples, says "> last bound" when it
// is in the overflow bucket, and "—" without answers.
func TestP99(t *testing.T) {
	inf := math.Inf(1)
	base := map[float64]float64{0.001: 10, 0.01: 10, inf: 10}
	// 100 more answers: 98 under 1 ms, 2 between 1 and 10 ms
	now := map[float64]float64{0.001: 108, 0.01: 110, inf: 110}
	if got := p99(now, base); got != "5.5 ms" {
		t.Errorf("p99 = %q, want 5.5 ms", got)
	}
	now = map[float64]float64{0.001: 108, 0.01: 108, inf: 110}
	if got := p99(now, base); got != "> 10.0 ms" {
		t.Errorf("p99 in the overflow bucket = %q", got)
	}
	if got := p99(base, base); got != "—" {
		t.Errorf("p99 without answers = %q", got)
	}
}

// TestFigures: rates come from the registry's counters between the oldest
// sample of the window and now.
func TestFigures(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := newSampler(reg, func() time.Time { return now })
	if f := s.figures(); !f.Available || f.HaveRates {
		t.Fatalf("before any sample: %+v", f)
	}
	sm, _ := s.take()
	s.keep(sm)
	now = now.Add(2 * time.Second)
	for range 10 {
		m.RouteSeries("GET", "/v1/requests/:id").Observe(200, 2*time.Millisecond)
	}
	m.Throttled(metrics.ReasonPolledTooEarly)
	f := s.figures()
	if !f.HaveRates || f.AnswersPerSec != 5 || f.ThrottledPS != 0.5 || f.Answers != 10 || f.P99 == "—" {
		t.Fatalf("figures: %+v", f)
	}
}
