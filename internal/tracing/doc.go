// Package tracing is asyncstatus's OpenTelemetry tracing (docs/reference.md
// §17): a tracer provider exporting OTLP over HTTP through a bounded queue, the
// server span of every API call (Middleware), and the spans the store and the
// webhook dispatcher ask for through their own small interfaces
// (store.Tracer, webhook.Tracer), which *Tracer satisfies.
//
// It is built only when tracing.otlp_endpoint is set; without it nothing of
// this package runs, so no span is made on any path. It imports no package of
// this module but internal/throttle: the store and the webhook dispatcher know
// it only by the interfaces they declare, and the wiring hands it to them.
//
// What a span may carry is narrow on purpose: method, route template, status,
// script names, request ids, event names and attempt numbers. Never a query
// string, an API key, a poll token, a request's context, progress or result,
// nor a webhook's URL beyond its host.
package tracing
