// Package metrics holds asyncstatus's Prometheus collectors: HTTP
// requests by route and status class, transitions, refusals (429 by reason, 503),
// Redis script latency, the sweeper, the embedded-store warning and build info.
//
// Everything is registered on the *prometheus.Registry handed to [New]; there are
// no package globals and the default registry is never touched, so tests can make
// as many independent sets as they like. Labels never carry request ids, keys,
// tenants or raw paths: every label takes its values from a small fixed set (a
// registered route pattern, an HTTP method, a status class, a script name).
//
// The package imports client_golang and, of this module, only the leaves
// buildinfo and domain: the HTTP layer, the store and the sweeper report through its methods and through small types of its own
// ([SweepStats]), never the other way round. Every method of a nil *Metrics does
// nothing, so callers need not check.
package metrics
