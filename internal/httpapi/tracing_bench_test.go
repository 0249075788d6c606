package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
	"github.com/asyncstatus/asyncstatus/internal/tracing"
)

// ---- BenchmarkServerTracing*: the cost of tracing (docs/reference.md §17) ----
//
// The server of BenchmarkServer* (fake store, metrics, access log), in the same
// run: off (tracing.otlp_endpoint empty: no middleware, no tracer: the build's
// only difference is nil checks) and on at sample_ratio 1 (the server span of
// every call, and the script span the store makes of its one script call,
// batched and exported by OTLP/HTTP to a collector in this process that reads
// and discards them: its CPU counts too). With no Redis the server's own CPU
// is all there is, so this is the largest share tracing can take of an answer.
//
//	go test -run '^$' -bench BenchmarkServerTracing -benchmem -count 5 ./internal/httpapi/

// tracedRequests is the fake store making the span store.run makes of its
// one script call per operation.
type tracedRequests struct {
	*benchRequests
	t *tracing.Tracer
}

func (f tracedRequests) Poll(ctx context.Context, p domain.PollParams) (domain.PollResult, error) {
	ctx, end := f.t.StartScript(ctx, "poll")
	defer end(nil)
	return f.benchRequests.Poll(ctx, p)
}

func (f tracedRequests) Complete(ctx context.Context, p domain.TransitionParams, in domain.CompleteInput) (*domain.Request, error) {
	ctx, end := f.t.StartScript(ctx, "transition")
	defer end(nil)
	return f.benchRequests.Complete(ctx, p, in)
}

func benchTracing(b *testing.B, method, uri string, body func(ref referenceRequest, create, complete []byte) []byte, want int) {
	ref, create, complete := loadReference(b)
	f := newBenchRequests(b, ref)
	bd := body(ref, create, complete)
	b.Run("off", func(b *testing.B) {
		h, key := benchTracedServer(b, f, nil)
		runServer(b, h.App().Handler(), method, uri, key, bd, want)
	})
	b.Run("on", func(b *testing.B) {
		col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		defer col.Close()
		tr, err := tracing.New(tracing.Options{Endpoint: col.URL, SampleRatio: 1, BatchInterval: 200 * time.Millisecond,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		h, key := benchTracedServer(b, tracedRequests{f, tr}, tr)
		runServer(b, h.App().Handler(), method, uri, key, bd, want)
		b.StopTimer()
		if err := tr.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
		if s := tr.Stats(); s.Dropped > 0 {
			b.Logf("%d spans dropped of %d", s.Dropped, s.Dropped+s.Exported)
		}
	})
}

// benchTracedServer is benchAsyncstatus with tracing on when tr is set.
func benchTracedServer(b *testing.B, reqs httpapi.Requests, tr *tracing.Tracer) (*httpapi.Server, string) {
	b.Helper()
	return benchAsyncstatus(b, reqs, func(o *httpapi.Options) {
		if tr != nil {
			o.Tracing = tr.Middleware()
		}
	})
}

// BenchmarkServerTracingPoll: GET /v1/requests/{id}, tracing off and on.
func BenchmarkServerTracingPoll(b *testing.B) {
	benchTracing(b, "GET", "/v1/requests/"+benchID, func(referenceRequest, []byte, []byte) []byte { return nil }, 200)
}

// BenchmarkServerTracingComplete: POST /v1/requests/{id}/complete, tracing off and on.
func BenchmarkServerTracingComplete(b *testing.B) {
	benchTracing(b, "POST", "/v1/requests/"+benchID+"/complete", func(_ referenceRequest, _, complete []byte) []byte { return complete }, 200)
}

// ---- BenchmarkTracingRedis*: answers per second with the real store ----
//
// The whole server over the real store on a redis-server of the tests' own
// (one call at a time, as one client sees it): tracing off (no tracer at
// all) and on at sample_ratio 1 (a server span and a script span per call,
// exported to a collector in this process), sub-benchmarks of the same run.
// ns/op is the answer's wall time; 1e9/ns is answers per second.
//
//	go test -run '^$' -bench BenchmarkTracingRedis -benchtime 3000x -count 5 ./internal/httpapi/

func benchTracingRedis(b *testing.B, method string, complete bool) {
	ref, _, completeBody := loadReference(b)
	ctxJSON := compactJSON(b, ref.Create.Context)
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			var tr *tracing.Tracer
			var st store.Tracer
			if on {
				col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
				}))
				defer col.Close()
				var err error
				tr, err = tracing.New(tracing.Options{Endpoint: col.URL, SampleRatio: 1, BatchInterval: benchInterval(),
					Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = tr.Shutdown(context.Background()) }()
				st = tr
			}
			rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b)})
			defer rdb.Close()
			s, err := store.New(rdb, store.Options{Prefix: testenv.Isolate(b), EarlyTolerance: 1, OpTimeout: 5 * time.Second,
				AutoPipeline: true, Tracer: st})
			if err != nil {
				b.Fatal(err)
			}
			keys := memKeys{m: map[string]domain.APIKey{}}
			plain, k, err := auth.NewKey("acme", domain.ScopeRead|domain.ScopeWrite, "bench", time.Now())
			if err != nil {
				b.Fatal(err)
			}
			_ = keys.SaveKey(context.Background(), k)
			ids := make([]string, b.N)
			n := 1
			if complete {
				n = b.N
			}
			for i := range n {
				r, _, err := s.Create(context.Background(), domain.CreateParams{
					Call:  domain.Call{Tenant: "acme", By: k.ID},
					Input: domain.CreateInput{Type: ref.Create.Type, Context: ctxJSON},
				})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = r.ID
			}
			for i := n; i < b.N; i++ {
				ids[i] = ids[0]
			}
			m, _ := metrics.New(prometheus.NewRegistry())
			o := httpapi.Options{Metrics: m}
			if tr != nil {
				o.Tracing = tr.Middleware()
			}
			a := auth.New(keys, []byte("0123456789abcdef0123456789abcdef"), time.Minute, time.Now)
			h := httpapi.New(s, a, nil, o, slog.New(slog.NewTextHandler(io.Discard, nil))).App().Handler()
			var req fasthttp.Request
			var ctx fasthttp.RequestCtx
			req.Header.SetHost("asyncstatus.test")
			req.Header.Set("Authorization", "Bearer "+plain)
			req.Header.SetMethod(method)
			if complete {
				req.Header.SetContentType("application/json")
				req.SetBody(completeBody)
			}
			b.ResetTimer()
			cpu := testenv.ProcessCPU()
			for i := range b.N {
				uri := "/v1/requests/" + ids[i]
				if complete {
					uri += "/complete"
				}
				req.SetRequestURI(uri)
				ctx.Init(&req, nil, nil)
				// as a fasthttp server does between two requests (Fiber keeps
				// the user context among the user values)
				ctx.ResetUserValues()
				ctx.Response.Reset()
				h(&ctx)
				if code := ctx.Response.StatusCode(); code != 200 {
					b.Fatalf("%s %s answered %d: %s", method, uri, code, ctx.Response.Body())
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "answers/s")
			b.ReportMetric(float64(testenv.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkTracingRedisPoll: GET /v1/requests/{id} on redis-server, tracing off and on.
func BenchmarkTracingRedisPoll(b *testing.B) { benchTracingRedis(b, "GET", false) }

// BenchmarkTracingRedisComplete: POST /v1/requests/{id}/complete on redis-server, tracing off and on.
func BenchmarkTracingRedisComplete(b *testing.B) { benchTracingRedis(b, "POST", true) }

func benchInterval() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("ASYNCSTATUS_BENCH_TRACE_INTERVAL")); err == nil {
		return d
	}
	return 200 * time.Millisecond
}
