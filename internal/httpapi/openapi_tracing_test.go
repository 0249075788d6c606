package httpapi_test

import (
	"slices"
	"testing"
)

// untraced are the paths whose calls make no span (tracing.Middleware): the
// probes and the scrape. Every other operation takes a W3C trace context.
var untraced = []string{"/healthz", "/livez", "/readyz", "/metrics"}

// TestOpenAPITraceContextHeaders: every operation the tracing middleware
// makes a span of declares the optional traceparent and tracestate request
// headers (docs/reference.md §17), and a call carrying them, well formed or
// not, is valid by the document and answered as without them.
func TestOpenAPITraceContextHeaders(t *testing.T) {
	k := loadContract(t)
	for path, item := range k.doc.Paths.Map() {
		for method, op := range item.Operations() {
			declared := map[string]bool{}
			for _, p := range append(item.Parameters, op.Parameters...) {
				if p.Value != nil && p.Value.In == "header" {
					declared[p.Value.Name] = !p.Value.Required
				}
			}
			for _, h := range []string{"traceparent", "tracestate"} {
				optional, ok := declared[h]
				switch {
				case slices.Contains(untraced, path) && ok:
					t.Errorf("%s %s declares %s, but its calls make no span", method, path, h)
				case !slices.Contains(untraced, path) && !ok:
					t.Errorf("%s %s does not declare the %s header", method, path, h)
				case ok && !optional:
					t.Errorf("%s %s requires %s; it is optional", method, path, h)
				}
			}
		}
	}

	e := observed(t)
	for _, x := range []exchange{
		{name: "traceparent and tracestate", method: "GET", path: "/openapi.json", want: 200,
			hdr: []string{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate", "vendor=abc"}},
		{name: "malformed traceparent ignored", method: "GET", path: "/openapi.json", want: 200,
			hdr: []string{"traceparent", "not a trace context", "tracestate", "=="}},
	} {
		k.check(t, e, x)
	}
}
