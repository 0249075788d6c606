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
		ctx, sp := t.tr.Start(ctx, method, t.server[mi][si]...)
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
		if r := c.Route(); r != nil && r.Method != "USE" && r.Path != "" {
			sp.SetName(method + " " + r.Path)
			sp.SetAttributes(attribute.String("http.route", r.Path))
		}
		sp.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			sp.SetStatus(codes.Error, "")
			sp.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
		}
		return err
	}
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
