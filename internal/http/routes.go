package httpapi

import "github.com/asyncstatus/asyncstatus/internal/domain"

// routes registers every route of the API in one place (spec §4).
func (s *Server) routes() {
	a := s.app
	a.Use(s.requestID)

	a.Get("/healthz", s.healthz)
	a.Get("/readyz", s.readyz)

	v1 := a.Group("/v1")
	v1.Post("/requests", s.authed(domain.ScopeWrite, false), s.create)
	v1.Get("/requests/:id", s.authed(domain.ScopeRead, true), s.poll)
	v1.Get("/requests/:id/events", s.authed(domain.ScopeRead, true), s.events)
	v1.Post("/requests/:id/processing", s.authed(domain.ScopeWrite, false), s.processing)
	v1.Post("/requests/:id/complete", s.authed(domain.ScopeWrite, false), s.complete)
	v1.Post("/requests/:id/fail", s.authed(domain.ScopeWrite, false), s.fail)
	v1.Post("/requests/:id/cancel", s.authed(domain.ScopeWrite, false), s.cancel)
	v1.Delete("/requests/:id", s.authed(domain.ScopeAdmin, false), s.remove)
}
