package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a Tracer. Endpoint, SampleRatio and ServiceName are the
// tracing.* keys (docs/reference.md §9, §17); the rest have defaults that
// tests shrink.
type Options struct {
	// Endpoint is the OTLP/HTTP collector's URL; "/v1/traces" is added when
	// it has no path. Required.
	Endpoint string
	// SampleRatio of the traces started here (parent-based). default: 0, none
	// (config's default is 1.0).
	SampleRatio float64
	// ServiceName is service.name. default: "asyncstatus".
	ServiceName string
	// ServiceVersion is service.version. default: "".
	ServiceVersion string
	// Log receives the throttled warning about dropped spans. default: slog.Default().
	Log *slog.Logger
	// QueueSize bounds the spans waiting for the exporter. default: 4096.
	QueueSize int
	// BatchSize is the most spans one export sends. default: 512.
	BatchSize int
	// BatchInterval: spans wait at most this long for a batch. default: 2s.
	BatchInterval time.Duration
	// ExportTimeout bounds one export; a batch not taken by then is dropped.
	// default: 5s.
	ExportTimeout time.Duration
	// Headers are sent with every export (a collector's API key, say:
	// HeadersFromEnv). default: none.
	Headers map[string]string
}

// MaxKeptBytes bounds a kept trace context (KeepContext): a traceparent (55
// bytes), a space, and a tracestate of at most 256 bytes (longer ones are
// not kept: the traceparent is what links).
const MaxKeptBytes = 55 + 1 + 256

// Tracer makes asyncstatus's spans. Its methods are safe for concurrent use.
type Tracer struct {
	tp   *sdktrace.TracerProvider
	tr   trace.Tracer
	q    *queue
	prop propagation.TraceContext
	// scripts holds each script's span name and attributes (a
	// scriptSpan), made once: they are the same on every call.
	scripts cache[string, *scriptSpan]
	// servers holds the server spans' names and attributes by serverKey
	// (serverSpan).
	servers cache[serverKey, *serverAttrs]
	// serverStart and scriptStart are the spans' start options: the kind
	// alone, as attributes given at the start would be copied twice (into
	// the start's configuration, then into the span).
	serverStart, scriptStart []trace.SpanStartOption
}

// scriptSpan is the name and attributes of every span of one script.
type scriptSpan struct {
	name  string
	attrs []attribute.KeyValue
}

// New starts a Tracer exporting to o.Endpoint. It does not contact the
// collector: one that is down at start is the same as one that goes down
// later.
func New(o Options) (*Tracer, error) {
	if o.Endpoint == "" {
		return nil, errors.New("tracing: no endpoint")
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracing: endpoint %q is not an http(s) URL", u.Redacted())
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	if o.ServiceName == "" {
		o.ServiceName = "asyncstatus"
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 4096
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 512
	}
	if o.BatchInterval <= 0 {
		o.BatchInterval = 2 * time.Second
	}
	if o.ExportTimeout <= 0 {
		o.ExportTimeout = 5 * time.Second
	}
	// Failed batches are dropped and counted rather than retried: retries
	// would hold the queue while the collector is away (queue.go).
	exp := newExporter(u.String(), o.Headers)
	attrs := []attribute.KeyValue{attribute.String("service.name", o.ServiceName)}
	if o.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", o.ServiceVersion))
	}
	q := newQueue(exp, o)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))),
		sdktrace.WithSpanProcessor(q),
	)
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/asyncstatus/asyncstatus"), q: q,
		serverStart: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
		scriptStart: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}}, nil
}

// Shutdown sends the spans still queued (bounded by ctx) and stops.
func (t *Tracer) Shutdown(ctx context.Context) error {
	return t.tp.Shutdown(ctx)
}

// ForceFlush sends the spans queued so far.
func (t *Tracer) ForceFlush(ctx context.Context) error {
	return t.tp.ForceFlush(ctx)
}

// Stats are the spans dropped (a full queue, a failed export) and exported.
type Stats struct{ Dropped, Exported int64 }

// Stats are the counters since New.
func (t *Tracer) Stats() Stats {
	return Stats{Dropped: t.q.dropped.Load(), Exported: t.q.exported.Load()}
}

var noEnd = func(error) {}

// StartScript starts the span of one Lua script call (store.Tracer), a child
// of ctx's span; none when ctx has no recording span, so that background
// reads do not make orphan traces. It names the script, never its KEYS or
// ARGV.
func (t *Tracer) StartScript(ctx context.Context, name string) (context.Context, func(error)) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noEnd
	}
	ss := t.scripts.get(name, newScriptSpan)
	// The attributes after the start, in one call: see serverStart.
	ctx, sp := t.tr.Start(ctx, ss.name, t.scriptStart...)
	sp.SetAttributes(ss.attrs...)
	return ctx, func(err error) {
		if err != nil {
			sp.SetStatus(codes.Error, "redis call failed")
			sp.SetAttributes(attribute.String("error.type", errorType(err)))
		}
		sp.End()
	}
}

func newScriptSpan(name string) *scriptSpan {
	return &scriptSpan{name: "EVALSHA " + name, attrs: []attribute.KeyValue{attribute.String("db.system.name", "redis"),
		attribute.String("db.operation.name", "EVALSHA"),
		attribute.String("db.stored_procedure.name", name)}}
}

// errorType is a short, secret-free class of a Redis failure: never the
// message, which may quote a script's arguments.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "redis_error"
}

// KeepContext is the trace context a new request keeps (store.Tracer): ctx's
// span as a W3C traceparent, and its tracestate after a space when that fits
// in MaxKeptBytes; "" when ctx has no valid span context.
func (t *Tracer) KeepContext(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	h := headerCarrier{}
	t.prop.Inject(ctx, h)
	kept := h["traceparent"]
	if ts := h["tracestate"]; ts != "" && len(kept)+1+len(ts) <= MaxKeptBytes {
		kept += " " + ts
	}
	return kept
}

// kept is the span context of a kept trace context; invalid when there is none.
func (t *Tracer) kept(kept string) trace.SpanContext {
	if kept == "" || len(kept) > MaxKeptBytes {
		return trace.SpanContext{}
	}
	tp, ts, _ := strings.Cut(kept, " ")
	if len(tp) == 55 && tp[:3] == "00-" {
		// What KeepContext writes, version 00, read as the W3C propagator
		// reads it but without its carrier map and context: every
		// transition of a traced request reads one.
		return parseTraceParent00(tp, ts)
	}
	h := headerCarrier{"traceparent": tp}
	if ts != "" {
		h["tracestate"] = ts
	}
	return trace.SpanContextFromContext(t.prop.Extract(context.Background(), h))
}

// parseTraceParent00 is propagation.TraceContext's reading of a version 00
// traceparent tp (55 bytes, "00-" first) and of its tracestate ts: lower-case
// hex only, no reserved flag, non-zero ids; a tracestate that does not parse
// is left out, the traceparent still read.
func parseTraceParent00(tp, ts string) trace.SpanContext {
	var scc trace.SpanContextConfig
	var flags [1]byte
	if tp[35] != '-' || tp[52] != '-' || !lowerHex(scc.TraceID[:], tp[3:35]) || !lowerHex(scc.SpanID[:], tp[36:52]) ||
		!lowerHex(flags[:], tp[53:55]) || flags[0] > 3 {
		return trace.SpanContext{}
	}
	scc.TraceFlags = trace.TraceFlags(flags[0]) & (trace.FlagsSampled | trace.FlagsRandom)
	if ts != "" {
		scc.TraceState, _ = trace.ParseTraceState(ts)
	}
	scc.Remote = true
	if sc := trace.NewSpanContext(scc); sc.IsValid() {
		return sc
	}
	return trace.SpanContext{}
}

// lowerHex decodes src (2*len(dst) lower-case hex digits) into dst.
func lowerHex(dst []byte, src string) bool {
	for i := range dst {
		hi, lo := hexDigit(src[2*i]), hexDigit(src[2*i+1])
		if hi > 15 || lo > 15 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func hexDigit(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 255
}

// LinkKept links ctx's span to the create's kept trace context (store.Tracer):
// a transition answered, a timeout applied.
func (t *Tracer) LinkKept(ctx context.Context, kept string) {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	if sc := t.kept(kept); sc.IsValid() {
		sp.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{linkCreate}})
	}
}

var linkCreate = attribute.String("asyncstatus.link", "create")

// StartTimeout starts the span of one of the sweeper's timeouts of request
// id (store.Tracer): a root span (the sweeper is nobody's call), linked to
// the create by LinkKept once the transition has read the record.
func (t *Tracer) StartTimeout(ctx context.Context, id, to string) (context.Context, func(error)) {
	ctx, sp := t.tr.Start(ctx, "sweeper timeout", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("asyncstatus.request.id", id), attribute.String("asyncstatus.request.to", to)))
	return ctx, func(err error) {
		if err != nil {
			sp.SetStatus(codes.Error, "timeout not applied")
			sp.SetAttributes(attribute.String("error.type", errorType(err)))
		}
		sp.End()
	}
}

// StartDelivery starts the span of one webhook delivery attempt
// (webhook.Tracer): in the create's trace, a child of the kept span context
// (and linked to it), so that one trace runs from the caller's create to the
// partner's receipt. Without a kept context it is a root span. host is the
// endpoint's host only: a URL's path and query may carry the partner's
// secrets.
func (t *Tracer) StartDelivery(ctx context.Context, kept, requestID, event, host string, attempt int) (context.Context, func(status int, failure string)) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", http.MethodPost),
			attribute.String("server.address", host),
			attribute.String("asyncstatus.request.id", requestID),
			attribute.String("asyncstatus.webhook.event", event),
			attribute.Int("asyncstatus.webhook.attempt", attempt))}
	if sc := t.kept(kept); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{linkCreate}}))
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, sp := t.tr.Start(ctx, "webhook "+event, opts...)
	return ctx, func(status int, failure string) {
		if status > 0 {
			sp.SetAttributes(attribute.Int("http.response.status_code", status))
		}
		if failure != "" {
			sp.SetStatus(codes.Error, "delivery failed")
			sp.SetAttributes(attribute.String("error.type", deliveryErrorType(status)))
		}
		sp.End()
	}
}

// deliveryErrorType classes a failed delivery without the receiver's words.
func deliveryErrorType(status int) string {
	if status > 0 {
		return fmt.Sprint(status)
	}
	return "no_answer"
}

// Inject writes ctx's span as traceparent (and tracestate) into h
// (webhook.Tracer).
func (t *Tracer) Inject(ctx context.Context, h http.Header) {
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// headerCarrier is a lower-case map carrier, cheaper than an http.Header.
type headerCarrier map[string]string

func (h headerCarrier) Get(k string) string { return h[k] }
func (h headerCarrier) Set(k, v string)     { h[k] = v }
func (h headerCarrier) Keys() []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	return out
}

// HeadersFromEnv reads the headers to send with every export from the
// OpenTelemetry SDK's variables, through getenv:
// OTEL_EXPORTER_OTLP_TRACES_HEADERS, else OTEL_EXPORTER_OTLP_HEADERS. Their
// form is "key=value,key2=value2" with percent-encoded values (the OTLP
// exporter specification). A collector's API key goes there rather than in
// the configuration file. An entry that does not parse is an error that
// names its place, never its value: values are often secrets.
func HeadersFromEnv(getenv func(string) string) (map[string]string, error) {
	name := "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	raw := getenv(name)
	if raw == "" {
		name = "OTEL_EXPORTER_OTLP_HEADERS"
		raw = getenv(name)
	}
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for i, entry := range strings.Split(raw, ",") {
		k, v, ok := strings.Cut(entry, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) }) {
			return nil, fmt.Errorf("tracing: %s: entry %d is not key=value", name, i+1)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil || strings.ContainsAny(val, "\r\n\x00") {
			return nil, fmt.Errorf("tracing: %s: the value of entry %d (%s) is not percent-encoded text", name, i+1, k)
		}
		out[http.CanonicalHeaderKey(k)] = val
	}
	return out, nil
}
