package httpapi

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

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
	call := s.webhookCall(c)
	w, err := s.opts.Webhooks.RegisterWebhook(c.UserContext(), call, in)
	if err != nil {
		return err
	}
	// The same base as a request's absolute URL (http.public_url, else this request's).
	c.Set(fiber.HeaderLocation, strings.TrimSuffix(s.requestURL(c, ""), "/v1/requests/")+"/v1/webhooks/"+w.ID)
	return s.writeWebhookJSON(c, fiber.StatusCreated, w)
}

func (s *Server) listWebhooks(c *fiber.Ctx) error {
	call := s.webhookCall(c)
	ws, err := s.opts.Webhooks.ListWebhooks(c.UserContext(), call)
	if err != nil {
		return err
	}
	if ws == nil {
		ws = []domain.Webhook{}
	}
	return s.writeWebhookJSON(c, fiber.StatusOK, fiber.Map{"items": ws})
}

func (s *Server) getWebhook(c *fiber.Ctx) error {
	call := s.webhookCall(c)
	w, err := s.opts.Webhooks.Webhook(c.UserContext(), call, utils.CopyString(c.Params("id")))
	if err != nil {
		return err
	}
	return s.writeWebhookJSON(c, fiber.StatusOK, w)
}

func (s *Server) deleteWebhook(c *fiber.Ctx) error {
	call := s.webhookCall(c)
	err := s.opts.Webhooks.DeleteWebhook(c.UserContext(), call, utils.CopyString(c.Params("id")))
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (s *Server) webhookDeliveries(c *fiber.Ctx) error {
	call := s.webhookCall(c)
	ds, err := s.opts.Webhooks.WebhookDeliveries(c.UserContext(), call, utils.CopyString(c.Params("id")))
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []domain.WebhookDelivery{}
	}
	return s.writeWebhookJSON(c, fiber.StatusOK, fiber.Map{"items": ds})
}

// webhookCall is the caller of a webhook route: its tenant, and the
// credential the store counts the admin rate limits on (when it counts them:
// authedCounted).
func (s *Server) webhookCall(c *fiber.Ctx) domain.WebhookCall {
	p := principal(c)
	return domain.WebhookCall{Tenant: p.Tenant, Credential: rateCredential(p), Rate: s.countedRate(c)}
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
