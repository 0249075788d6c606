package httpapi

import "github.com/asyncstatus/asyncstatus/internal/domain"

// routes registers every route of the API in one place (docs/reference.md §4).
func (s *Server) routes() {
	a := s.app
	if s.opts.Tracing != nil { // first, so that the span covers the whole answer
		a.Use(s.opts.Tracing)
	}
	if s.cors.enabled() { // first, so that every answer carries its headers (cors.go)
		a.Use(s.corsMiddleware)
	}
	a.Use(s.withState)
	if s.observing() {
		a.Use(s.observe) // metrics and access log (observe.go)
	}

	a.Get("/", s.root)
	a.Get("/healthz", s.healthz)
	a.Get("/livez", s.healthz) // the name Kubernetes' own endpoints use
	a.Get("/readyz", s.readyz)
	if !s.opts.MetricsElsewhere {
		a.Get("/metrics", s.metricsHandler())
	}
	a.Get("/openapi.json", s.openapi)

	v1 := a.Group("/v1")
	v1.Post("/requests", s.authedCounted(domain.ScopeWrite, false), s.create)
	v1.Get("/requests", s.authedCounted(domain.ScopeRead, false), s.list) // API keys only: poll tokens cannot list

	// before :id, which would take "counts"
	v1.Get("/requests/counts", s.authedCounted(domain.ScopeRead, false), s.counts)
	v1.Get("/requests/:id", s.authedPoll(), s.poll)
	if !s.opts.withoutLRO {
		// The two other views of the poll (docs/reference.md §15): right after it, so that
		// each is matched one or two routes after the poll, and the poll as
		// before (Fiber tries a method's routes in the order registered). The
		// monitor, the smaller answer, affords the second place.
		v1.Get("/operations/:id", s.authedPoll(), s.getOperation)    // Google Operations (google.go)
		v1.Get("/requests/:id/operation", s.authedPoll(), s.monitor) // Azure status monitor (azure.go)
	}
	v1.Get("/requests/:id/events", s.authedCounted(domain.ScopeRead, true), s.events)
	if s.opts.Waits != nil { // docs/reference.md §12 (stream.go)
		v1.Get("/requests/:id/stream", streamHeaders, s.authedStream(), s.stream)
	}
	v1.Post("/requests/:id/processing", s.authedCounted(domain.ScopeWrite, false), s.processing)
	v1.Post("/requests/:id/complete", s.authedCounted(domain.ScopeWrite, false), s.complete)
	v1.Post("/requests/:id/fail", s.authedCounted(domain.ScopeWrite, false), s.fail)
	v1.Post("/requests/:id/cancel", s.authedCounted(domain.ScopeWrite, false), s.cancel)
	v1.Delete("/requests/:id", s.authedCounted(domain.ScopeAdmin, false), s.remove)

	if !s.opts.withoutLRO { // Google Operations (google.go): the custom verbs are routes of their own
		v1.Get("/operations", s.authedCounted(domain.ScopeRead, false), s.listOperations)
		v1.Delete("/operations/:id", s.authedCounted(domain.ScopeAdmin, false), s.deleteOperation)
		v1.Post(`/operations/:id\:cancel`, s.authedCounted(domain.ScopeWrite, false), s.cancelOperation)
		v1.Post(`/operations/:id\:wait`, s.authedCounted(domain.ScopeRead, true), s.waitOperation)
	}

	if s.opts.Webhooks != nil { // webhooks.enabled (docs/reference.md §10; webhooks.go)
		v1.Post("/webhooks", s.authedCounted(domain.ScopeAdmin, false), s.registerWebhook)
		v1.Get("/webhooks", s.authedCounted(domain.ScopeAdmin, false), s.listWebhooks)
		v1.Get("/webhooks/:id", s.authedCounted(domain.ScopeAdmin, false), s.getWebhook)
		v1.Delete("/webhooks/:id", s.authedCounted(domain.ScopeAdmin, false), s.deleteWebhook)
		v1.Get("/webhooks/:id/deliveries", s.authedCounted(domain.ScopeAdmin, false), s.webhookDeliveries)
	}
}
