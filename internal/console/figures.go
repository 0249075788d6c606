package console

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The metric families the figures are drawn from (internal/metrics).
const (
	metricAnswers   = "asyncstatus_http_requests_total"
	metricThrottled = "asyncstatus_http_throttled_total"
	metricDuration  = "asyncstatus_http_request_duration_seconds"
)

// figuresWindow is how far back the rates and the p99 look.
const figuresWindow = 10 * time.Second

// sample is the registry's running totals at one moment.
type sample struct {
	at                 time.Time
	answers, throttled float64
	buckets            map[float64]float64 // upper bound -> cumulative count, all routes together
}

// sampler keeps the samples of the last figuresWindow, so that a page can show
// rates without a Prometheus server.
type sampler struct {
	g   prometheus.Gatherer
	now func() time.Time

	mu      sync.Mutex
	samples []sample
}

func newSampler(g prometheus.Gatherer, now func() time.Time) *sampler {
	return &sampler{g: g, now: now}
}

func (s *sampler) run(ctx context.Context) {
	if s.g == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if sm, ok := s.take(); ok {
				s.keep(sm)
			}
		}
	}
}

func (s *sampler) keep(sm sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, sm)
	cut := 0
	for cut < len(s.samples)-1 && sm.at.Sub(s.samples[cut].at) > figuresWindow {
		cut++
	}
	s.samples = s.samples[cut:]
}

func (s *sampler) take() (sample, bool) {
	mfs, err := s.g.Gather()
	if err != nil && len(mfs) == 0 {
		return sample{}, false
	}
	sm := sample{at: s.now(), buckets: map[float64]float64{}}
	for _, mf := range mfs {
		switch mf.GetName() {
		case metricAnswers:
			for _, m := range mf.GetMetric() {
				sm.answers += m.GetCounter().GetValue()
			}
		case metricThrottled:
			for _, m := range mf.GetMetric() {
				sm.throttled += m.GetCounter().GetValue()
			}
		case metricDuration:
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					sm.buckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
				}
				sm.buckets[math.Inf(1)] += float64(h.GetSampleCount())
			}
		}
	}
	return sm, true
}

// Figures are what the figures page shows.
type Figures struct {
	Available bool
	// Rates over the last Window; HaveRates is false until two samples exist.
	HaveRates                  bool
	Window                     time.Duration
	AnswersPerSec, ThrottledPS float64
	P99                        string
	// Totals since the process started.
	Answers, Throttled float64
}

// figures compares the registry now with the oldest sample of the window.
func (s *sampler) figures() Figures {
	if s.g == nil {
		return Figures{}
	}
	now, ok := s.take()
	if !ok {
		return Figures{}
	}
	f := Figures{Available: true, Answers: now.answers, Throttled: now.throttled, P99: "—"}
	s.mu.Lock()
	var base *sample
	if len(s.samples) > 0 && now.at.Sub(s.samples[0].at) >= 500*time.Millisecond {
		b := s.samples[0]
		base = &b
	}
	s.mu.Unlock()
	if base == nil {
		return f
	}
	dt := now.at.Sub(base.at).Seconds()
	f.HaveRates, f.Window = true, now.at.Sub(base.at).Round(time.Second)
	f.AnswersPerSec = (now.answers - base.answers) / dt
	f.ThrottledPS = (now.throttled - base.throttled) / dt
	f.P99 = p99(now.buckets, base.buckets)
	return f
}

// p99 estimates the 99th percentile of the answers between two samples from
// the histogram's bucket counts, interpolating inside the bucket as
// Prometheus's histogram_quantile does.
func p99(now, base map[float64]float64) string {
	bounds := make([]float64, 0, len(now))
	for le := range now {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	total := now[math.Inf(1)] - base[math.Inf(1)]
	if total <= 0 {
		return "—"
	}
	rank := 0.99 * total
	prevLe, prevCount := 0.0, 0.0
	for _, le := range bounds {
		c := now[le] - base[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return fmt.Sprintf("> %s", seconds(prevLe))
			}
			q := prevLe
			if c > prevCount {
				q += (le - prevLe) * (rank - prevCount) / (c - prevCount)
			}
			return seconds(q)
		}
		prevLe, prevCount = le, c
	}
	return "—"
}

func seconds(v float64) string {
	d := time.Duration(v * float64(time.Second))
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", v*1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", v*1e3)
	}
	return fmt.Sprintf("%.2f s", v)
}
