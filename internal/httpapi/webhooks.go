package httpapi

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// The /v1/webhooks routes (docs/reference.md §10), admin scope. Another tenant's endpoint
// answers the same 404 as an unknown one.

func (s *Server) registerWebhook(c *fiber.Ctx) error {
	body, err := s.jsonBody(c)
	if err != nil {
		return err
	}
	in, err := wire.DecodeWebhook(body)
	if err != nil {
		return err
	}
	w, err := s.opts.Webhooks.RegisterWebhook(c.UserContext(), s.call(c), in)
	if err != nil {
		return err
	}
	// The same base as a request's absolute URL (http.public_url, else this request's).
	c.Set(fiber.HeaderLocation, strings.TrimSuffix(s.requestURL(c, ""), "/v1/requests/")+"/v1/webhooks/"+w.ID)
	return s.writeWebhookJSON(c, fiber.StatusCreated, w)
}

func (s *Server) listWebhooks(c *fiber.Ctx) error {
	ws, err := s.opts.Webhooks.ListWebhooks(c.UserContext(), s.call(c))
	if err != nil {
		return err
	}
	if ws == nil {
		ws = []domain.Webhook{}
	}
	return s.writeWebhookJSON(c, fiber.StatusOK, fiber.Map{"items": ws})
}

func (s *Server) getWebhook(c *fiber.Ctx) error {
	w, err := s.opts.Webhooks.Webhook(c.UserContext(), s.call(c), pathID(c))
	if err != nil {
		return err
	}
	return s.writeWebhookJSON(c, fiber.StatusOK, w)
}

func (s *Server) deleteWebhook(c *fiber.Ctx) error {
	err := s.opts.Webhooks.DeleteWebhook(c.UserContext(), s.call(c), pathID(c))
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (s *Server) webhookDeliveries(c *fiber.Ctx) error {
	ds, err := s.opts.Webhooks.WebhookDeliveries(c.UserContext(), s.call(c), pathID(c))
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []domain.WebhookDelivery{}
	}
	return s.writeWebhookJSON(c, fiber.StatusOK, fiber.Map{"items": ds})
}

// writeWebhookJSON answers with a JSON body that must not be cached (it may hold a secret).
func (s *Server) writeWebhookJSON(c *fiber.Ctx, status int, v any) error {
	body, err := s.json.Marshal(v)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Status(status).Send(body)
}
