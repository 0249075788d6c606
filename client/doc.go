// Package client is the Go client of the asyncstatus HTTP API (v1): a consumer
// creates requests and drives their transitions, a client follows them to
// their end.
//
//	c, err := client.New("https://status.example", client.WithAPIKey(key))
//	created, err := c.Create(ctx, client.CreateParams{Type: "statement.export"})
//	final, err := c.Wait(ctx, created.ID, &client.WaitOptions{RetryAfter: created.RetryAfter})
//
// Every route of the contract has a typed method: requests (Create, Get, Poll, List,
// Events, MarkProcessing, Heartbeat, Complete, Fail, Cancel, Delete) and
// webhooks (RegisterWebhook, ListWebhooks, GetWebhook, DeleteWebhook,
// WebhookDeliveries). Wait and Stream follow one request to its terminal
// state; RunJob runs a function as the work of one request.
//
// # Errors
//
// Every answer of the service that is not a success is an *Error carrying the
// problem's code, status, detail and request id. Compare with errors.Is
// against the sentinels (ErrNotFound, ErrAlreadyTerminal, ErrRateLimited, ...)
// or read the fields with errors.As.
//
// # Retries and idempotency
//
// A GET is retried when the transport fails or the service answers 503, with
// capped, jittered backoff that honours Retry-After (see RetryPolicy). A POST
// is retried only because it carries an Idempotency-Key: the package makes a
// fresh random key for every POST call unless the caller gives one with
// IdempotencyKey, and sends the same key on every retry of that call, so that
// a retried create makes one request and a retried transition applies once.
// A key given by the caller is kept for 24h (idempotency.ttl) by the service:
// the same key with the same body replays the first answer. DELETE is not
// retried: a retry after a lost answer would report NOT_FOUND for a delete
// that worked.
//
// # Tracing
//
// Every call sends the W3C traceparent and tracestate of the OpenTelemetry
// span in its context, if any (docs/reference.md §17), so that the service's
// spans, and a create's webhook deliveries, join the caller's trace;
// ContextWithTraceParent gives them as text instead.
//
// This package uses the standard library and the OpenTelemetry trace API
// (go.opentelemetry.io/otel/trace, to read the caller's span; no SDK) only,
// and imports nothing from the service's internal packages; it speaks only HTTP. Clients in other languages
// can be generated from the service's /openapi.json.
package client
