// Package webhook delivers request status changes to the endpoints tenants
// register (docs/reference.md §10; docs/webhooks.md): the registration service behind the
// /v1/webhooks routes, the dispatcher that every serve replica runs, the
// Standard Webhooks signature, the encryption of endpoint secrets at rest, and
// the guard that keeps deliveries away from internal addresses.
//
// It imports internal/domain and declares the small interfaces it needs of the
// store (Endpoints, Outbox); it must not import internal/store or internal/httpapi.
// cmd/asyncstatus wires it.
package webhook
