package client

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"
)

// Trace context (docs/reference.md §17): every call carries the W3C
// traceparent (and tracestate) of the caller's context, so that the service's
// spans join the caller's trace, and a create's webhook deliveries run in it.
// The span comes from ctx through the OpenTelemetry trace API alone (no SDK:
// the package stays light, and a program without OpenTelemetry sends
// nothing); a caller that has only the header's text, from a request it is
// serving, gives it with ContextWithTraceParent.

type traceParentKey struct{}

type traceParent struct{ parent, state string }

// ContextWithTraceParent returns ctx whose calls send traceparent (and
// tracestate, when not "") as given, instead of the OpenTelemetry span ctx
// may hold. The service ignores a traceparent that is not valid W3C.
func ContextWithTraceParent(ctx context.Context, traceparent, tracestate string) context.Context {
	return context.WithValue(ctx, traceParentKey{}, traceParent{traceparent, tracestate})
}

// setTraceContext writes ctx's trace context into h, when it has one.
func setTraceContext(ctx context.Context, h http.Header) {
	if tp, ok := ctx.Value(traceParentKey{}).(traceParent); ok {
		if tp.parent != "" {
			h.Set("traceparent", tp.parent)
			if tp.state != "" {
				h.Set("tracestate", tp.state)
			}
		}
		return
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	h.Set("traceparent", "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-"+flags)
	if ts := sc.TraceState().String(); ts != "" {
		h.Set("tracestate", ts)
	}
}
