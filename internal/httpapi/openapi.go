package httpapi

import (
	_ "embed"

	"github.com/gofiber/fiber/v2"
)

// openapiJSON is the OpenAPI 3.1 description of every route, kept next to the
// routes it describes. openapi_test.go drives every route, success and error
// answers, and validates each request and answer against it, so it cannot drift
// from the code.
//
//go:embed openapi.json
var openapiJSON []byte

func (s *Server) openapi(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.Send(openapiJSON)
}
