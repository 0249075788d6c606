package tracing

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkScriptSpan: one script span under a recording parent, exported.
func BenchmarkScriptSpan(b *testing.B) {
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer col.Close()
	tr, err := New(Options{Endpoint: col.URL, SampleRatio: 1, BatchInterval: 200 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ctx, sp := tr.tr.Start(context.Background(), "parent")
	defer sp.End()
	b.ReportAllocs()
	for b.Loop() {
		_, end := tr.StartScript(ctx, "poll")
		end(nil)
	}
	b.StopTimer()
	_ = tr.Shutdown(context.Background())
}
