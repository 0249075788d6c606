package tracing

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestNewRefusesBadEndpoints: only an http(s) URL with a host is an endpoint.
func TestNewRefusesBadEndpoints(t *testing.T) {
	for _, e := range []string{"", "collector:4318", "ftp://c", "http://"} {
		if tr, err := New(Options{Endpoint: e}); err == nil {
			_ = tr.Shutdown(context.Background())
			t.Errorf("New(%q) accepted", e)
		}
	}
}

// TestKeptContext: the kept context is the span's traceparent (with its
// tracestate when that fits), it reads back as the same span context, and
// a context too long or malformed is not kept or not read.
func TestKeptContext(t *testing.T) {
	tr := newTestTracer(t, "http://127.0.0.1:1", 1)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=abc")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	kept := tr.KeepContext(ctx)
	if kept != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 vendor=abc" {
		t.Fatalf("kept %q", kept)
	}
	if got := tr.kept(kept); !got.Equal(sc.WithRemote(true)) {
		t.Errorf("read back %v, want %v", got, sc)
	}
	long, _ := trace.ParseTraceState("vendor=" + strings.Repeat("x", 250) + ",other=" + strings.Repeat("y", 100))
	kept = tr.KeepContext(trace.ContextWithSpanContext(context.Background(), sc.WithTraceState(long)))
	if kept != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" || len(kept) > MaxKeptBytes {
		t.Errorf("a long tracestate kept: %q", kept)
	}
	if tr.KeepContext(context.Background()) != "" {
		t.Error("kept a context without span")
	}
	for _, bad := range []string{"garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", strings.Repeat("0", MaxKeptBytes+1)} {
		if tr.kept(bad).IsValid() {
			t.Errorf("read %q as valid", bad)
		}
	}
}

// TestKeptReadAsThePropagatorReads: the kept context's fast reading of a
// version 00 traceparent agrees with the W3C propagator's on every input,
// well formed or not.
func TestKeptReadAsThePropagatorReads(t *testing.T) {
	tr := newTestTracer(t, "http://127.0.0.1:1", 1)
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	var cases []string
	for _, flags := range []string{"00", "01", "02", "03", "04", "09", "ff", "0A", "0g"} {
		cases = append(cases, "00-"+tid+"-"+sid+"-"+flags)
	}
	cases = append(cases,
		"00-"+strings.ToUpper(tid)+"-"+sid+"-01", "00-"+tid+"-"+strings.ToUpper(sid)+"-01",
		"00-00000000000000000000000000000000-"+sid+"-01", "00-"+tid+"-0000000000000000-01",
		"00-"+tid+"_"+sid+"-01", "00-"+tid+"-"+sid+"_01", "00-"+tid[:31]+"x-"+sid+"-01",
		"01-"+tid+"-"+sid+"-01", "01-"+tid+"-"+sid+"-01-extra", "ff-"+tid+"-"+sid+"-01")
	for _, tp := range cases {
		for _, ts := range []string{"", "vendor=abc", "a=1,b=2", "not a tracestate", "=x"} {
			kept := tp
			if ts != "" {
				kept += " " + ts
			}
			h := propagation.MapCarrier{"traceparent": tp}
			if ts != "" {
				h["tracestate"] = ts
			}
			want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), h))
			if got := tr.kept(kept); !got.Equal(want) {
				t.Errorf("%q read as %v, the propagator reads %v", kept, got, want)
			}
		}
	}
}

// TestNoOrphanScriptSpans: a script call without a recording span in its
// context (a background read, an unsampled call) makes no span.
func TestNoOrphanScriptSpans(t *testing.T) {
	tr := newTestTracer(t, "http://127.0.0.1:1", 1)
	ctx, end := tr.StartScript(context.Background(), "poll")
	end(nil)
	if trace.SpanFromContext(ctx).SpanContext().IsValid() {
		t.Error("a script span without parent")
	}
	// sample_ratio 0: the server span is not recording, nor is its child.
	tr0 := newTestTracer(t, "http://127.0.0.1:1", 0)
	pctx, sp := tr0.tr.Start(context.Background(), "call")
	defer sp.End()
	ctx, end = tr0.StartScript(pctx, "poll")
	end(nil)
	if trace.SpanFromContext(ctx).SpanContext().SpanID() != sp.SpanContext().SpanID() {
		t.Error("a script span under an unsampled call")
	}
}

// TestQueueDropsWhenTheCollectorHangs: with a collector that never
// answers, ending spans never waits, and the spans beyond the queue and
// those of the batch that timed out are counted as dropped.
func TestQueueDropsWhenTheCollectorHangs(t *testing.T) {
	hang := make(chan struct{})
	var mu sync.Mutex
	calls := 0
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer col.Close()
	defer close(hang)
	var logged testenv.Buffer
	tr, err := New(Options{Endpoint: col.URL, SampleRatio: 1, QueueSize: 8, BatchSize: 4, BatchInterval: 10 * time.Millisecond,
		ExportTimeout: 100 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		_, sp := tr.tr.Start(context.Background(), "call")
		sp.End()
	}
	for deadline := time.Now().Add(10 * time.Second); tr.Stats().Dropped < 100; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("dropped %d of 100 spans, want all counted", tr.Stats().Dropped)
		}
	}
	if s := tr.Stats(); s.Exported != 0 {
		t.Errorf("exported %d to a collector that never answered", s.Exported)
	}
	// One warning a minute, however many spans were dropped.
	if n := strings.Count(logged.String(), "tracing: spans dropped"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logged.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tr.Shutdown(ctx)
}

// TestQueueExports: a collector that answers gets every span, counted as
// exported.
func TestQueueExports(t *testing.T) {
	var mu sync.Mutex
	got := 0
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got += len(b)
		mu.Unlock()
	}))
	defer col.Close()
	tr := newTestTracer(t, col.URL, 1)
	endAndFlush(t, tr, 10)
	if s := tr.Stats(); s.Exported != 10 || s.Dropped != 0 {
		t.Errorf("stats %+v, want 10 exported", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if got == 0 {
		t.Error("the collector got nothing")
	}
}

func newTestTracer(t *testing.T, endpoint string, ratio float64) *Tracer {
	t.Helper()
	tr, err := New(Options{Endpoint: endpoint, SampleRatio: ratio, Log: quiet(), ExportTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return tr
}

// endAndFlush ends n root spans and sends them.
func endAndFlush(t *testing.T, tr *Tracer, n int) {
	t.Helper()
	for range n {
		_, sp := tr.tr.Start(context.Background(), "call")
		sp.End()
	}
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
}
