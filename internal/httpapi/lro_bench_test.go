package httpapi_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
)

// ---- BenchmarkLRO*: the views of docs/reference.md §15 against the poll ----
//
// The status monitor and the Operation are the poll's read with another
// encoder, so each should answer at least 0.95x the polls per second of the
// poll, measured in the same run on the same server (the real one: metrics,
// the JSON access log, a cached API key) over a fake store that returns a
// processing request with progress and context. BenchmarkLRORouterCost
// measures the poll on a server with the §15 routes and on one without.
//
//	go test -run '^$' -bench BenchmarkLRO -benchmem -count 5 ./internal/httpapi/

// lroBenchRequests answers every poll with the same processing request.
type lroBenchRequests struct {
	httpapi.Requests
	r domain.Request
}

func (f *lroBenchRequests) CountsRateLimits(string) bool { return false }

func (f *lroBenchRequests) Poll(context.Context, domain.PollParams) (domain.PollResult, error) {
	r := f.r
	return domain.PollResult{Request: &r, RetryAfter: 2}, nil
}

func newLROBenchRequests() *lroBenchRequests {
	now := domain.Time{Time: time.Date(2026, 5, 4, 12, 0, 0, 123e6, time.UTC)}
	return &lroBenchRequests{r: domain.Request{ID: benchID, Type: "statement.export", Status: domain.StatusProcessing,
		Context:   json.RawMessage(`{"account":"acc_wealth_881204","tax_year":2025,"delivery_channel":"PORTAL_DOWNLOAD","locale":"en-GB"}`),
		Progress:  json.RawMessage(`{"percent":40,"message":"page 4 of 10"}`),
		CreatedBy: "key_abcdefghijklmnop", CreatedAt: now, UpdatedAt: domain.Time{Time: now.Add(72 * time.Second)}, Version: 2}}
}

// lroCall is one call a benchmark repeats: a handler and its request.
type lroCall struct {
	name string
	h    fasthttp.RequestHandler
	ctx  fasthttp.RequestCtx
}

func newLROCall(name string, h fasthttp.RequestHandler, uri, key string) *lroCall {
	c := &lroCall{name: name, h: h}
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI(uri)
	req.Header.SetHost("asyncstatus.test")
	req.Header.Set("Authorization", "Bearer "+key)
	c.ctx.Init(&req, nil, nil)
	return c
}

// interleave runs the calls b.N times each, in turns of 256, so that the
// load of a shared machine weighs on each alike. It reports each call's wall
// time and the CPU time of the benchmark's thread per call (thread-ns/op:
// what the call's code costs, whatever else runs on the machine), and, for
// each call after the first, its answers per second relative to the first's
// by that CPU time.
func interleave(b *testing.B, calls ...*lroCall) {
	const turn = 256
	wall := make([]time.Duration, len(calls))
	cpu := make([]time.Duration, len(calls))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += turn {
		n := min(turn, b.N-done)
		for i, c := range calls {
			t0, c0 := time.Now(), threadCPU()
			for range n {
				c.ctx.ResetUserValues()
				c.ctx.Response.Reset()
				c.h(&c.ctx)
			}
			cpu[i] += threadCPU() - c0
			wall[i] += time.Since(t0)
			if code := c.ctx.Response.StatusCode(); code != 200 {
				b.Fatalf("%s answered %d: %s", c.name, code, c.ctx.Response.Body())
			}
		}
	}
	b.StopTimer()
	for i, c := range calls {
		b.ReportMetric(float64(wall[i].Nanoseconds())/float64(b.N), c.name+"-ns/op")
		b.ReportMetric(float64(cpu[i].Nanoseconds())/float64(b.N), c.name+"-thread-ns/op")
		if i > 0 && cpu[i] > 0 {
			b.ReportMetric(float64(cpu[0])/float64(cpu[i]), c.name+"/"+calls[0].name+"-answers/s")
		}
	}
}

// BenchmarkLROViews: one poll of a processing request by a cached API key,
// as the representation, the status monitor and the Operation, in turns.
func BenchmarkLROViews(b *testing.B) {
	srv, key := benchAsyncstatus(b, newLROBenchRequests(), nil)
	h := srv.App().Handler()
	interleave(b, newLROCall("poll", h, "/v1/requests/"+benchID, key),
		newLROCall("monitor", h, "/v1/requests/"+benchID+"/operation", key),
		newLROCall("operation", h, "/v1/operations/"+benchID, key),
		newLROCall("poll-again", h, "/v1/requests/"+benchID, key)) // the noise: the same call twice
}

// BenchmarkLRORouterCost: the poll on a server with the routes of §15 and on
// one without them, in turns.
func BenchmarkLRORouterCost(b *testing.B) {
	with, key := benchAsyncstatus(b, newLROBenchRequests(), nil)
	without, key2 := benchAsyncstatus(b, newLROBenchRequests(), httpapi.WithoutLRORoutes)
	again, key3 := benchAsyncstatus(b, newLROBenchRequests(), httpapi.WithoutLRORoutes)
	interleave(b, newLROCall("without", without.App().Handler(), "/v1/requests/"+benchID, key2),
		newLROCall("with", with.App().Handler(), "/v1/requests/"+benchID, key),
		newLROCall("without-again", again.App().Handler(), "/v1/requests/"+benchID, key3)) // the noise: another server alike
}

// tempFile is a file for the access log in b's temporary directory.
func tempFile(b *testing.B) *os.File {
	f, err := os.Create(filepath.Join(b.TempDir(), "access.log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}
