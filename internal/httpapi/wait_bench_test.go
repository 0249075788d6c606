package httpapi_test

import (
	"sort"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// BenchmarkWakeLatency measures, on a real redis-server, the time from a
// transition's acknowledgement (its 200 read by the caller) to the answer of
// a long poll held on replica A, the transition made through A itself
// ("same") or through replica B ("other"). It reports p50 and p99 in ms.
//
//	go test -run XXX -bench BenchmarkWakeLatency -benchtime 300x ./internal/httpapi/
func BenchmarkWakeLatency(b *testing.B) {
	for _, via := range []string{"same", "other"} {
		b.Run(via, func(b *testing.B) {
			p := newReplicaPair(b, testenv.Backends()[1], nil, nil)
			target := p.urlA
			if via == "other" {
				target = p.urlB
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				id, _ := p.create(b)
				got := make(chan time.Time, 1)
				go func() {
					do(b, "GET", p.urlA+"/v1/requests/"+id, "", 30*time.Second, "Authorization", "Bearer "+p.key, "Prefer", "wait=25")
					got <- time.Now()
				}()
				waitWaiting(b, p.a, 1)
				b.StartTimer()
				r := do(b, "POST", target+"/v1/requests/"+id+"/processing", "", 5*time.Second, "Authorization", "Bearer "+p.key)
				acked := time.Now()
				if r.code != 200 {
					b.Fatalf("%d", r.code)
				}
				lat = append(lat, (<-got).Sub(acked))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
		})
	}
}
