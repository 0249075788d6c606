package httpapi_test

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// BenchmarkWatchLatency measures, on a real redis-server, the time from a
// change's acknowledgement (its 200 read by the caller) to its event read
// from a watch (GET /v1/requests?watch=true) held on replica A, the change
// made through A itself ("same") or through replica B ("other"). Each change
// is a heartbeat of one request; the machine is otherwise idle. It reports
// p50 and p99 in ms.
//
//	go test -run XXX -bench BenchmarkWatchLatency -benchtime 300x ./internal/httpapi/
func BenchmarkWatchLatency(b *testing.B) {
	for _, via := range []string{"same", "other"} {
		b.Run(via, func(b *testing.B) {
			p := newReplicaPair(b, testenv.Backends()[1], nil, nil)
			target := p.urlA
			if via == "other" {
				target = p.urlB
			}
			id, _ := p.create(b)
			w := openWatch(b, p.urlA+"/v1/requests?watch=true", "Authorization", "Bearer "+p.reader)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				r := do(b, "POST", target+"/v1/requests/"+id+"/processing", "", 5*time.Second, "Authorization", "Bearer "+p.key)
				acked := time.Now()
				if r.code != 200 {
					b.Fatalf("%d", r.code)
				}
				w.take(b, 1)
				lat = append(lat, time.Since(acked))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
		})
	}
}

// BenchmarkWatchMemory holds b.N watches on one replica (one tenant, on the
// embedded store) and reports the Go memory (heap and goroutine stacks in
// use, after a GC) they hold, per watch: the server's goroutine, writer and
// watch, and this process's client side of each connection (a bare socket,
// no reader goroutine), so an upper bound of the server's part. Kernel
// socket buffers are not Go memory and not counted.
//
//	go test -run XXX -bench BenchmarkWatchMemory -benchtime 2000x ./internal/httpapi/
func BenchmarkWatchMemory(b *testing.B) {
	p := newReplicaPair(b, testenv.Backends()[0], func(o *app.Options) { o.HTTP.Wait.MaxWaiters = 1 << 20 }, nil)
	u, err := url.Parse(p.urlA)
	if err != nil {
		b.Fatal(err)
	}
	req := "GET /v1/requests?watch=true HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + p.reader + "\r\n\r\n"
	open := func() net.Conn {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write([]byte(req)); err != nil {
			b.Fatal(err)
		}
		// the headers and the retry chunk: the watch is held once they came
		br := bufio.NewReaderSize(c, 512)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.HasPrefix(line, "retry: 2000") {
				break
			}
		}
		return c
	}
	open().Close() // the feed, the hub's subscriptions and the servers' pools
	measure := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	waitWaiting(b, p.a, 0)
	before := measure()
	conns := make([]net.Conn, 0, b.N)
	b.ResetTimer()
	for range b.N {
		conns = append(conns, open())
	}
	b.StopTimer()
	waitWaiting(b, p.a, b.N)
	after := measure()
	b.ReportMetric(float64(after-before)/float64(b.N), "B/watch")
	if b.N >= 100 {
		fmt.Printf("held %d watches: %.1f KiB each\n", b.N, float64(after-before)/float64(b.N)/1024)
	}
	for _, c := range conns {
		c.Close()
	}
}
