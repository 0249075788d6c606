package httpapi

import (
	"github.com/gofiber/fiber/v2"
)

// CORS (docs/reference.md §13): pages on the allowed origins may call every route. No
// cookies are used, so credentials are never allowed; the allowed origin is
// echoed rather than "*", with Vary: Origin on every answer, so that a cache
// between the two never hands one origin's answer to another.
const (
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders  = "Authorization, X-Poll-Token, Idempotency-Key, If-None-Match, Prefer, Content-Type, Last-Event-ID, X-Request-Id"
	corsExposeHeaders = "ETag, Retry-After, Location, Operation-Location, Preference-Applied, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, X-Request-Id"
	corsMaxAge        = "600"
)

// corsPolicy is the set of allowed origins; the zero value allows none and
// adds no header at all.
type corsPolicy struct {
	any     bool
	origins map[string]bool
}

func newCORSPolicy(origins []string) corsPolicy {
	p := corsPolicy{origins: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			p.any = true
		} else {
			p.origins[o] = true
		}
	}
	return p
}

func (p corsPolicy) enabled() bool { return p.any || len(p.origins) > 0 }

// allowed is the Origin header when that origin may call the API, else "".
func (p corsPolicy) allowed(c *fiber.Ctx) string {
	o := c.Get(fiber.HeaderOrigin)
	if o == "" || o == "null" || !(p.any || p.origins[o]) {
		return ""
	}
	return o
}

// setHeaders adds the CORS headers of an ordinary answer. The error handler
// calls it too, for errors written before any middleware (an oversized body).
func (p corsPolicy) setHeaders(c *fiber.Ctx) {
	if !p.enabled() {
		return
	}
	c.Vary(fiber.HeaderOrigin)
	if o := p.allowed(c); o != "" {
		c.Set(fiber.HeaderAccessControlAllowOrigin, o)
		c.Set(fiber.HeaderAccessControlExposeHeaders, corsExposeHeaders)
	}
}

// corsMiddleware answers preflights from allowed origins and marks every
// other answer; it runs first, so that errors carry the headers too.
func (s *Server) corsMiddleware(c *fiber.Ctx) error {
	p := s.cors
	if c.Method() == fiber.MethodOptions && c.Get(fiber.HeaderAccessControlRequestMethod) != "" {
		if o := p.allowed(c); o != "" {
			c.Vary(fiber.HeaderOrigin, fiber.HeaderAccessControlRequestMethod, fiber.HeaderAccessControlRequestHeaders)
			c.Set(fiber.HeaderAccessControlAllowOrigin, o)
			c.Set(fiber.HeaderAccessControlAllowMethods, corsAllowMethods)
			c.Set(fiber.HeaderAccessControlAllowHeaders, corsAllowHeaders)
			c.Set(fiber.HeaderAccessControlMaxAge, corsMaxAge)
			return c.SendStatus(fiber.StatusNoContent)
		}
	}
	p.setHeaders(c)
	return c.Next()
}
