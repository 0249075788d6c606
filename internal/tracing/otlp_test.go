package tracing

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// capture is a collector that keeps the bodies it gets and the headers of
// the last one, and answers with answer (an ExportTraceServiceResponse).
type capture struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers http.Header
	answer  []byte
}

func (c *capture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.bodies = append(c.bodies, b)
	c.headers = r.Header.Clone()
	answer := c.answer
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(answer)
}

func (c *capture) last(t *testing.T) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies) == 0 {
		t.Fatal("the collector got nothing")
	}
	msg := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(c.bodies[len(c.bodies)-1], msg); err != nil {
		t.Fatalf("the export does not decode: %v", err)
	}
	return msg
}

// variedSpans are spans of two resources and three scopes with every kind
// of attribute value, events, links, statuses, remote and local parents, a
// tracestate and values long enough to need 2- and 3-byte lengths.
func variedSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	res1 := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "asyncstatus"), attribute.String("service.version", "1.2.3"))
	res2 := resource.NewSchemaless(attribute.String("service.name", "other"), attribute.Int("n", 7))
	tp1 := sdktrace.NewTracerProvider(sdktrace.WithResource(res1), sdktrace.WithSpanProcessor(rec))
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithResource(res2), sdktrace.WithSpanProcessor(rec))
	trA := tp1.Tracer("github.com/asyncstatus/asyncstatus")
	trB := tp1.Tracer("scope-b", trace.WithInstrumentationVersion("v9"),
		trace.WithSchemaURL("https://example.com/s"), trace.WithInstrumentationAttributes(attribute.Bool("x", true)))
	trC := tp2.Tracer("")

	ts, err := trace.ParseTraceState("vendor=abc,other=1")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled | trace.FlagsRandom,
		TraceState: ts, Remote: true})
	linked := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9},
		SpanID:  trace.SpanID{8, 8, 8, 8, 8, 8, 8, 8}, TraceFlags: trace.FlagsSampled})
	long := strings.Repeat("λ", 100)     // 200 bytes: a 2-byte length
	longer := strings.Repeat("x", 20000) // a 3-byte length

	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	ctx, server := trA.Start(ctx, "POST /v1/requests", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.route", "/v1/requests"), attribute.Int("http.response.status_code", 202),
			attribute.String("empty", ""), attribute.Bool("false", false), attribute.Int64("zero", 0),
			attribute.Float64("pi", 3.25), attribute.Float64("nought", 0),
			attribute.StringSlice("ss", []string{"a", "", long}), attribute.IntSlice("is", []int{0, -1, 1 << 40}),
			attribute.BoolSlice("bs", []bool{true, false}), attribute.Float64Slice("fs", []float64{0.5}),
			attribute.StringSlice("none", nil), attribute.String("long", long), attribute.String("longer", longer)))
	_, script := trA.Start(ctx, "EVALSHA create", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{linkCreate}}))
	script.AddEvent("retry", trace.WithAttributes(attribute.Int("attempt", 2)))
	script.AddEvent("bare")
	script.SetStatus(codes.Error, "redis call failed")
	script.End()
	server.SetStatus(codes.Ok, "")
	server.End()
	_, internal := trB.Start(context.Background(), "sweeper timeout", trace.WithNewRoot())
	internal.End()
	_, other := trC.Start(context.Background(), "x", trace.WithSpanKind(trace.SpanKindProducer))
	other.End()
	_, consumer := trB.Start(context.Background(), "y", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(time.Unix(0, 0)))
	consumer.End(trace.WithTimestamp(time.Unix(0, 5)))
	return rec.Ended()
}

// canonical orders an export's resources and scopes, which the official
// exporter writes in a map's order.
func canonical(m *coltracepb.ExportTraceServiceRequest) {
	key := func(rs *tracepb.ResourceSpans) string { return rs.GetResource().String() }
	slices.SortFunc(m.ResourceSpans, func(a, b *tracepb.ResourceSpans) int { return strings.Compare(key(a), key(b)) })
	for _, rs := range m.ResourceSpans {
		slices.SortFunc(rs.ScopeSpans, func(a, b *tracepb.ScopeSpans) int {
			return strings.Compare(a.GetScope().GetName(), b.GetScope().GetName())
		})
	}
}

// TestExporterWritesWhatTheOfficialExporterWrites: our encoding of a varied
// batch decodes, with the official OTLP module, to the message the official
// otlptracehttp exporter sends for it, but for the links' tracestate, which
// the official exporter leaves out and the protocol has a field for.
func TestExporterWritesWhatTheOfficialExporterWrites(t *testing.T) {
	spans := variedSpans(t)
	official, ours := &capture{}, &capture{}
	offSrv, ourSrv := httptest.NewServer(official), httptest.NewServer(ours)
	defer offSrv.Close()
	defer ourSrv.Close()
	ctx := context.Background()
	off, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(offSrv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	if err := off.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	exp := newExporter(ourSrv.URL+"/v1/traces", nil)
	// Twice: the second export reuses the first's buffer.
	for range 2 {
		if err := exp.ExportSpans(ctx, spans); err != nil {
			t.Fatal(err)
		}
	}
	want, got := official.last(t), ours.last(t)
	if n := len(got.GetResourceSpans()); n != 2 {
		t.Fatalf("%d ResourceSpans, want 2", n)
	}
	var links int
	for _, rs := range got.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				for _, l := range sp.GetLinks() {
					links++
					if l.GetTraceState() != "" {
						t.Errorf("link tracestate %q, want none (the linked context has none)", l.GetTraceState())
					}
				}
			}
		}
	}
	if links != 1 {
		t.Errorf("%d links, want 1", links)
	}
	canonical(want)
	canonical(got)
	if d := cmpDiff(want, got); d != "" {
		t.Errorf("our export differs from the official exporter's:\n%s", d)
	}
	ours.mu.Lock()
	first, second := ours.bodies[0], ours.bodies[1]
	ours.mu.Unlock()
	if string(first) != string(second) {
		t.Error("the same spans exported twice gave different bytes")
	}
}

// TestExporterWritesLinksTraceState: a link's tracestate is sent.
func TestExporterWritesLinksTraceState(t *testing.T) {
	ts, _ := trace.ParseTraceState("vendor=abc")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1},
		TraceState: ts, TraceFlags: trace.FlagsSampled, Remote: true})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, sp := tp.Tracer("t").Start(context.Background(), "s", trace.WithLinks(trace.Link{SpanContext: sc}))
	sp.End()
	col := &capture{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	if err := newExporter(srv.URL, nil).ExportSpans(context.Background(), rec.Ended()); err != nil {
		t.Fatal(err)
	}
	l := col.last(t).GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0].GetLinks()[0]
	if l.GetTraceState() != "vendor=abc" {
		t.Errorf("link tracestate %q, want vendor=abc", l.GetTraceState())
	}
	if l.GetFlags() != 0x301 {
		t.Errorf("link flags %#x, want 0x301 (sampled, remote known, remote)", l.GetFlags())
	}
}

func cmpDiff(want, got proto.Message) string {
	if proto.Equal(want, got) {
		return ""
	}
	return "want: " + protoText(want) + "\n got: " + protoText(got)
}

func protoText(m proto.Message) string {
	return strings.ReplaceAll(prototext.Format(m), strings.Repeat("x", 20000), "x…")
}

// TestExporterCountsWhatTheCollectorRejects: a partial success's rejected
// spans are counted dropped, the rest exported.
func TestExporterCountsWhatTheCollectorRejects(t *testing.T) {
	answer, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{
		PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 3, ErrorMessage: "too old"}})
	if err != nil {
		t.Fatal(err)
	}
	col := &capture{answer: answer}
	srv := httptest.NewServer(col)
	defer srv.Close()
	tr := newTestTracer(t, srv.URL, 1)
	endAndFlush(t, tr, 10)
	if s := tr.Stats(); s.Exported != 7 || s.Dropped != 3 {
		t.Errorf("stats %+v, want 7 exported and 3 dropped", s)
	}
	var rejected *rejectedError
	if err := newExporter(srv.URL, nil).ExportSpans(context.Background(), variedSpans(t)); !errors.As(err, &rejected) || rejected.n != 3 {
		t.Errorf("export error %v, want 3 rejected", err)
	}
}

// TestCloseMsgMovesLongMessages: lengths that need one, two and three bytes
// read back.
func TestCloseMsgMovesLongMessages(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 70000} {
		b := []byte{0xAA}
		b, at := openMsg(b, 5)
		b = append(b, strings.Repeat("z", n)...)
		b = closeMsg(b, at)
		b = append(b, 0xBB)
		if b[0] != 0xAA || b[len(b)-1] != 0xBB {
			t.Fatalf("n=%d: the bytes around the message moved", n)
		}
		num, typ, l := protowire.ConsumeTag(b[1:])
		if num != 5 || typ != protowire.BytesType {
			t.Fatalf("n=%d: tag %d/%d", n, num, typ)
		}
		v, vl := protowire.ConsumeBytes(b[1+l:])
		if vl < 0 || len(v) != n || strings.Trim(string(v), "z") != "" || 1+l+vl != len(b)-1 {
			t.Errorf("n=%d: read back %d bytes (%d)", n, len(v), vl)
		}
	}
}

// TestExportHeaders: the configured headers go with every export.
func TestExportHeaders(t *testing.T) {
	col := &capture{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	exp := newExporter(srv.URL, map[string]string{"Api-Key": "s3cret", "x-tenant": "a b"})
	if err := exp.ExportSpans(context.Background(), variedSpans(t)); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	h := col.headers
	col.mu.Unlock()
	if h.Get("Api-Key") != "s3cret" || h.Get("X-Tenant") != "a b" || h.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("headers %v", h)
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), variedSpans(t)); err == nil {
		t.Error("an export after Shutdown did not fail")
	}
}

// TestExportFailures: a collector's error status is an error that does not
// quote its answer.
func TestExportFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "token abc is wrong", http.StatusUnauthorized)
	}))
	defer srv.Close()
	err := newExporter(srv.URL, nil).ExportSpans(context.Background(), variedSpans(t))
	if err == nil || strings.Contains(err.Error(), "abc") || !strings.Contains(err.Error(), "401") {
		t.Errorf("error %v, want the status without the collector's words", err)
	}
}

// TestHeadersFromEnv: the traces variable wins over the general one, values
// are percent-decoded, and a bad entry is an error that does not quote it.
func TestHeadersFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	h, err := HeadersFromEnv(env(map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":        "api-key=general",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=s%3Dcret%20x, x-tenant = a ",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h["Api-Key"] != "s=cret x" || h["X-Tenant"] != "a" {
		t.Errorf("headers %q", h)
	}
	h, err = HeadersFromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=general"}))
	if err != nil || h["Api-Key"] != "general" {
		t.Errorf("headers %q, %v", h, err)
	}
	if h, err := HeadersFromEnv(env(nil)); err != nil || h != nil {
		t.Errorf("no variables: %q, %v", h, err)
	}
	for _, bad := range []string{"a=1,secretnoequals", "a=1,=s3cret", "a b=s3cret", "a=%zzs3cret", "a=%0As3cret"} {
		_, err := HeadersFromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": bad}))
		if err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: the error quotes the value: %v", bad, err)
		}
	}
}
