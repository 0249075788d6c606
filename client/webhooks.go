package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// WebhookParams is what RegisterWebhook sends.
type WebhookParams struct {
	// URL receives the deliveries: https, and not an internal address, unless
	// the service allows otherwise (webhooks.allow_http, webhooks.allow_private).
	URL string `json:"url"`
	// Events to deliver. default (nil): the four terminal ones.
	Events []WebhookEvent `json:"events,omitempty"`
	// Description is free text for people. Optional.
	Description string `json:"description,omitempty"`
}

// RegisterWebhook registers an endpoint (POST /v1/webhooks, admin scope). The
// answer's Secret, which signs every delivery, is shown only this once.
func (c *Client) RegisterWebhook(ctx context.Context, p WebhookParams, opts ...CallOption) (*Webhook, error) {
	a, err := c.do(ctx, &call{method: http.MethodPost, path: "/v1/webhooks", body: p}, opts...)
	if err != nil {
		return nil, fmt.Errorf("register webhook: %w", err)
	}
	var w Webhook
	if err := decode(a, &w); err != nil {
		return nil, fmt.Errorf("register webhook: %w", err)
	}
	return &w, nil
}

// ListWebhooks lists the tenant's endpoints (GET /v1/webhooks, admin scope).
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	a, err := c.do(ctx, &call{method: http.MethodGet, path: "/v1/webhooks"})
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	var out struct {
		Items []Webhook `json:"items"`
	}
	if err := decode(a, &out); err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out.Items, nil
}

// GetWebhook reads one endpoint (GET /v1/webhooks/{id}, admin scope).
func (c *Client) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	if id == "" {
		return nil, errNoWebhookID
	}
	a, err := c.do(ctx, &call{method: http.MethodGet, path: webhookPath(id, "")})
	if err != nil {
		return nil, fmt.Errorf("get webhook %s: %w", id, err)
	}
	var w Webhook
	if err := decode(a, &w); err != nil {
		return nil, fmt.Errorf("get webhook %s: %w", id, err)
	}
	return &w, nil
}

// DeleteWebhook removes an endpoint and the messages still queued for it
// (DELETE /v1/webhooks/{id}, admin scope). It is not retried.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	if id == "" {
		return errNoWebhookID
	}
	if _, err := c.do(ctx, &call{method: http.MethodDelete, path: webhookPath(id, "")}); err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, err)
	}
	return nil
}

// WebhookDeliveries lists an endpoint's most recent delivery attempts, newest
// first (GET /v1/webhooks/{id}/deliveries, admin scope).
func (c *Client) WebhookDeliveries(ctx context.Context, id string) ([]Delivery, error) {
	if id == "" {
		return nil, errNoWebhookID
	}
	a, err := c.do(ctx, &call{method: http.MethodGet, path: webhookPath(id, "deliveries")})
	if err != nil {
		return nil, fmt.Errorf("deliveries of webhook %s: %w", id, err)
	}
	var out struct {
		Items []Delivery `json:"items"`
	}
	if err := decode(a, &out); err != nil {
		return nil, fmt.Errorf("deliveries of webhook %s: %w", id, err)
	}
	return out.Items, nil
}

var errNoWebhookID = errors.New("asyncstatus client: empty webhook id")

func webhookPath(id, suffix string) string {
	p := "/v1/webhooks/" + url.PathEscape(id)
	if suffix != "" {
		p += "/" + suffix
	}
	return p
}
