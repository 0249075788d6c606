package httpapi

import (
	"github.com/gofiber/fiber/v2"

	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// counts answers GET /v1/requests/counts (docs/reference.md §16): the exact
// numbers of the tenant's requests in each status under type or one label
// term and the time bounds.
func (s *Server) counts(c *fiber.Ctx) error {
	values := map[string][]string{}
	c.Context().QueryArgs().VisitAll(func(k, v []byte) {
		values[string(k)] = append(values[string(k)], string(v)) // string() copies
	})
	f, err := wire.DecodeCountsQuery(values)
	if err != nil {
		return err
	}
	f.Call = s.call(c)
	n, err := s.reqs.Counts(c.UserContext(), f)
	if err != nil {
		return err
	}
	body, err := s.json.Marshal(n)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}
