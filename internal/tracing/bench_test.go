package tracing

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// benchTracer is a Tracer at sample_ratio 1 exporting to a collector that
// reads each export and discards it, as one in another process costs this
// one nothing but the export itself.
func benchTracer(b *testing.B) *Tracer {
	b.Helper()
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(col.Close)
	tr, err := New(Options{Endpoint: col.URL, SampleRatio: 1, BatchInterval: 200 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

// measure runs b.N calls of one and reports the process's CPU per call,
// the export of every span included (cpu-ns/op), and the spans lost.
func measure(b *testing.B, tr *Tracer, one func()) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu := testenv.ProcessCPU()
	for i := range b.N {
		one()
		if i%1024 == 1023 {
			// Every span exported, none dropped: the benchmark makes spans
			// faster than any server would, and their export is part of
			// what is measured.
			if err := tr.ForceFlush(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := tr.ForceFlush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(testenv.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
	if s := tr.Stats(); s.Dropped > 0 {
		b.Errorf("%d spans dropped of %d", s.Dropped, s.Dropped+s.Exported)
	}
}

// BenchmarkScriptSpan: one script span under a recording parent, exported.
//
//	go test -run '^$' -bench 'BenchmarkScriptSpan|BenchmarkTracedCall' -benchtime 200000x -count 5 ./internal/tracing/
func BenchmarkScriptSpan(b *testing.B) {
	tr := benchTracer(b)
	ctx, sp := tr.tr.Start(context.Background(), "parent")
	defer sp.End()
	measure(b, tr, func() {
		_, end := tr.StartScript(ctx, "poll")
		end(nil)
	})
}

// BenchmarkTracedCall: the spans of one traced poll, through a Fiber app
// that does nothing else: the middleware's server span and one script span,
// exported. Its cpu-ns/op is what tracing adds to a poll's CPU.
func BenchmarkTracedCall(b *testing.B) {
	tr := benchTracer(b)
	app := fiber.New()
	app.Use(tr.Middleware())
	app.Get("/v1/requests/:id", func(c *fiber.Ctx) error {
		_, end := tr.StartScript(c.UserContext(), "poll")
		end(nil)
		return c.SendStatus(fiber.StatusOK)
	})
	h := app.Handler()
	var req fasthttp.Request
	req.Header.SetMethod(fiber.MethodGet)
	req.SetRequestURI("/v1/requests/0b6f8e4c-2b7e-4c55-9a41-3f0f5d7a9e21")
	req.Header.SetHost("asyncstatus.test")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	measure(b, tr, func() {
		// as a fasthttp server does between two requests (Fiber keeps the
		// user context among the user values)
		ctx.ResetUserValues()
		ctx.Response.Reset()
		h(&ctx)
		if ctx.Response.StatusCode() != fiber.StatusOK {
			b.Fatalf("answered %d", ctx.Response.StatusCode())
		}
	})
}
