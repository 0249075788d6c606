package tracing

import (
	"strconv"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// Middleware makes the server span of every API call (HTTP semantic
// conventions), a child of the call's W3C traceparent when it has one
// (tracestate honoured), and puts it in the call's user context, where the
// store's script spans and the create's kept context find it. It is
// registered first (httpapi.Options.Tracing), so the span covers the whole
// answer. The span carries the route template, never the path as sent nor
// the query string; no header is recorded, so no key or token either. The
// probes and the scrape (/healthz, /livez, /readyz, /metrics) make no span.
func (t *Tracer) Middleware() fiber.Handler {
	return func(c *fiber.Ctx) error {
		switch c.Path() {
		case "/healthz", "/livez", "/readyz", "/metrics":
			// Probes and scrapes, every few seconds from every replica's
			// orchestrator: traces of nothing, and their cost.
			return c.Next()
		}
		h := fasthttpCarrier{c}
		ctx := t.prop.Extract(c.UserContext(), h)
		mi := methodIndex(c.Method())
		method := "_OTHER"
		if mi < len(knownMethods) {
			method = knownMethods[mi]
		}
		si := 0
		if c.Context().IsTLS() {
			si = 1
		}
		// Started without attributes: the samplers here (parent-based,
		// trace id ratio) do not read them, and every attribute goes in
		// with one SetAttributes below, from a slice made once per
		// route and status (serverSpan): one allocation per span.
		ctx, sp := t.tr.Start(ctx, method, t.serverStart...)
		if !sp.IsRecording() {
			// Not sampled: the context still carries the span context, so
			// a create keeps it and a webhook delivery follows the caller's
			// decision.
			c.SetUserContext(ctx)
			return c.Next()
		}
		c.SetUserContext(ctx)
		defer sp.End()
		err := c.Next()
		if err != nil {
			// Answered here, as the server's error handler would after the
			// chain, so that the status below is the one sent.
			if herr := c.App().Config().ErrorHandler(c, err); herr != nil {
				_ = c.SendStatus(fiber.StatusInternalServerError)
			}
			err = nil
		}
		status := c.Response().StatusCode()
		route := ""
		// A route the app registered (it has handlers; the fallback Fiber
		// makes outside the chain has the path as sent) other than a
		// middleware's: its template.
		if r := c.Route(); r != nil && r.Method != "USE" && r.Path != "" && len(r.Handlers) > 0 {
			route = r.Path
		}
		a := t.serverSpan(mi, si, route, status)
		sp.SetName(a.name)
		sp.SetAttributes(a.attrs...)
		if status >= 500 {
			sp.SetStatus(codes.Error, "")
		}
		return err
	}
}

// serverKey is what a server span's name and attributes depend on.
type serverKey struct {
	method, scheme int
	status         int
	route          string
}

// serverAttrs are the name and the attributes of server spans with one
// serverKey.
type serverAttrs struct {
	name  string
	attrs []attribute.KeyValue
}

// serverSpan is the name and attributes of a server span, made once per
// method, scheme, route template and status: a bounded set, as the route is
// a template the app registered, never a path as sent. The SDK copies the
// attributes into the span, so one slice serves every span.
func (t *Tracer) serverSpan(mi, si int, route string, status int) *serverAttrs {
	return t.servers.get(serverKey{method: mi, scheme: si, status: status, route: route}, newServerAttrs)
}

func newServerAttrs(k serverKey) *serverAttrs {
	method := "_OTHER"
	if k.method < len(knownMethods) {
		method = knownMethods[k.method]
	}
	scheme := "http"
	if k.scheme == 1 {
		scheme = "https"
	}
	a := &serverAttrs{name: method, attrs: []attribute.KeyValue{attribute.String("http.request.method", method),
		attribute.String("url.scheme", scheme)}}
	if k.route != "" {
		a.name = method + " " + k.route
		a.attrs = append(a.attrs, attribute.String("http.route", k.route))
	}
	a.attrs = append(a.attrs, attribute.Int("http.response.status_code", k.status))
	if k.status >= 500 {
		a.attrs = append(a.attrs, attribute.String("error.type", strconv.Itoa(k.status)))
	}
	return a
}

// methodIndex is the method's place in knownMethods, len(knownMethods) for
// any other: semantic conventions call those _OTHER, as an unbounded set of
// names would be an unbounded set of span names. The constants are what the
// span keeps, never the method string, which points into a buffer fasthttp
// reuses for the next call (docs/pitfalls.md).
func methodIndex(m string) int {
	for i, k := range knownMethods {
		if m == k {
			return i
		}
	}
	return len(knownMethods)
}

var knownMethods = [...]string{fiber.MethodGet, fiber.MethodPost, fiber.MethodPut, fiber.MethodDelete, fiber.MethodPatch,
	fiber.MethodHead, fiber.MethodOptions, fiber.MethodConnect, fiber.MethodTrace}

// fasthttpCarrier reads the propagation headers of a Fiber call. Only
// traceparent and tracestate are ever asked for.
type fasthttpCarrier struct{ c *fiber.Ctx }

func (f fasthttpCarrier) Get(k string) string {
	// Copied: fasthttp reuses the buffer after the handler (docs/pitfalls.md),
	// and a span context outlives it in a kept context.
	return string(f.c.Request().Header.Peek(k))
}
func (f fasthttpCarrier) Set(string, string) {}
func (f fasthttpCarrier) Keys() []string     { return []string{"traceparent", "tracestate"} }
