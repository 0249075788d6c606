package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// errNoID refuses a call without a request id (it would reach another route).
var errNoID = errors.New("asyncstatus client: empty request id")

// CreateParams is what Create sends.
type CreateParams struct {
	// Type matches ^[a-z0-9][a-z0-9._-]{0,63}$ ("statement.export"). Required.
	Type string
	// Context is encoded as a JSON object (at most limits.context_bytes,
	// 4 KiB by default) and returned with the request. Optional.
	Context any
	// Labels (at most 8; names ^[a-z][a-z0-9_.-]{0,62}$, values
	// ^[A-Za-z0-9]([A-Za-z0-9._:/-]{0,61}[A-Za-z0-9])?$) are fixed at create;
	// listings can filter by them. Optional.
	Labels map[string]string
	// EstimatedDuration (1s..24h, whole seconds) sets the create answer's
	// Retry-After within the polling schedule. Optional.
	EstimatedDuration time.Duration
}

// Create creates a request (POST /v1/requests, write scope). It is retried
// under one Idempotency-Key, so one call makes at most one request.
func (c *Client) Create(ctx context.Context, p CreateParams, opts ...CallOption) (*Created, error) {
	body := map[string]any{"type": p.Type}
	if p.Context != nil {
		body["context"] = p.Context
	}
	if len(p.Labels) > 0 {
		body["labels"] = p.Labels
	}
	if p.EstimatedDuration > 0 {
		body["estimated_duration_seconds"] = int64((p.EstimatedDuration + time.Second - 1) / time.Second)
	}
	a, err := c.do(ctx, &call{method: http.MethodPost, path: "/v1/requests", body: body}, opts...)
	if err != nil {
		return nil, fmt.Errorf("create request: %w", err)
	}
	var cr Created
	if err := decode(a, &cr.Request); err != nil {
		return nil, fmt.Errorf("create request: %w", err)
	}
	var tok struct {
		PollToken string `json:"poll_token"`
	}
	_ = json.Unmarshal(a.body, &tok)
	cr.PollToken = tok.PollToken
	cr.Location = a.header.Get("Location")
	cr.RetryAfter, _ = retryAfter(a.header)
	return &cr, nil
}

// Get reads a request (GET /v1/requests/{id}, read scope or its poll token).
//
// Polling in a loop with Get is what Wait does better: Wait honours the
// pacing the service asks for and long-polls where it can.
func (c *Client) Get(ctx context.Context, id string) (*Request, error) {
	if id == "" {
		return nil, errNoID
	}
	a, err := c.do(ctx, &call{method: http.MethodGet, path: requestPath(id, "")})
	if err != nil {
		return nil, fmt.Errorf("get request %s: %w", id, err)
	}
	var r Request
	if err := decode(a, &r); err != nil {
		return nil, fmt.Errorf("get request %s: %w", id, err)
	}
	return &r, nil
}

// ListOptions filter a listing. Zero fields do not filter.
type ListOptions struct {
	// Type keeps requests of this type.
	Type string
	// Statuses keeps requests in any of these statuses.
	Statuses []Status
	// Labels keeps requests carrying every one of these labels (at most 4):
	// the label_selector.
	Labels map[string]string
	// CreatedAfter and CreatedBefore bound created_at, inclusive.
	CreatedAfter, CreatedBefore time.Time
	// Limit is the page size, 1..200. default: 50 (the service's).
	Limit int
	// Cursor starts at a page a previous listing returned as NextCursor, with
	// the same filters. default: the first page.
	Cursor string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Type != "" {
		q.Set("type", o.Type)
	}
	if len(o.Statuses) > 0 {
		s := make([]string, len(o.Statuses))
		for i, st := range o.Statuses {
			s[i] = string(st)
		}
		q.Set("status", strings.Join(s, ","))
	}
	if !o.CreatedAfter.IsZero() {
		q.Set("created_after", o.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if !o.CreatedBefore.IsZero() {
		q.Set("created_before", o.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	if sel := labelSelector(o.Labels); sel != "" {
		q.Set("label_selector", sel)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return q
}

// ListPage reads one page of the tenant's requests (GET /v1/requests, read
// scope; API keys only), newest first.
func (c *Client) ListPage(ctx context.Context, o ListOptions) (*Page, error) {
	a, err := c.do(ctx, &call{method: http.MethodGet, path: "/v1/requests", query: o.query()})
	if err != nil {
		return nil, fmt.Errorf("list requests: %w", err)
	}
	var p Page
	if err := decode(a, &p); err != nil {
		return nil, fmt.Errorf("list requests: %w", err)
	}
	return &p, nil
}

// Pages iterates over the pages of a listing, following the cursors. It stops
// after the last page, when the loop breaks, or after yielding an error.
func (c *Client) Pages(ctx context.Context, o ListOptions) iter.Seq2[*Page, error] {
	return func(yield func(*Page, error) bool) {
		for {
			p, err := c.ListPage(ctx, o)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(p, nil) || p.NextCursor == "" {
				return
			}
			o.Cursor = p.NextCursor
		}
	}
}

// List iterates over every request of a listing, page after page:
//
//	for r, err := range c.List(ctx, client.ListOptions{Type: "statement.export"}) {
//		if err != nil { return err }
//		...
//	}
func (c *Client) List(ctx context.Context, o ListOptions) iter.Seq2[*Request, error] {
	return func(yield func(*Request, error) bool) {
		for p, err := range c.Pages(ctx, o) {
			if err != nil {
				yield(nil, err)
				return
			}
			for _, r := range p.Items {
				if !yield(r, nil) {
					return
				}
			}
		}
	}
}

// Events reads a request's status changes, oldest first
// (GET /v1/requests/{id}/events, read scope or its poll token).
func (c *Client) Events(ctx context.Context, id string) ([]Event, error) {
	if id == "" {
		return nil, errNoID
	}
	a, err := c.do(ctx, &call{method: http.MethodGet, path: requestPath(id, "events")})
	if err != nil {
		return nil, fmt.Errorf("events of request %s: %w", id, err)
	}
	var out struct {
		Items []Event `json:"items"`
	}
	if err := decode(a, &out); err != nil {
		return nil, fmt.Errorf("events of request %s: %w", id, err)
	}
	return out.Items, nil
}

// MarkProcessing moves a queued request to processing, or, when it is already
// processing, records a heartbeat (POST /v1/requests/{id}/processing, write
// scope). p (optional) reports progress. A processing request that goes
// lifecycle.processing_timeout (15m by default) without one fails with
// ERR_JOB_EXECUTION_TIMED_OUT.
func (c *Client) MarkProcessing(ctx context.Context, id string, p *Progress, opts ...CallOption) (*Request, error) {
	var body any
	if p != nil {
		body = p
	}
	return c.transition(ctx, id, "processing", body, opts)
}

// Heartbeat is MarkProcessing under the name a running job calls it by: it
// keeps a processing request alive and, with p, reports its progress.
func (c *Client) Heartbeat(ctx context.Context, id string, p *Progress, opts ...CallOption) (*Request, error) {
	return c.MarkProcessing(ctx, id, p, opts...)
}

// Complete records a queued or processing request as succeeded with its result
// (POST /v1/requests/{id}/complete, write scope). On a terminal request it
// answers an error matching ErrAlreadyTerminal whose Request is the request as
// it is.
func (c *Client) Complete(ctx context.Context, id string, res Result, opts ...CallOption) (*Request, error) {
	if res == nil {
		return nil, fmt.Errorf("complete request %s: nil result", id)
	}
	body := struct {
		ResultType string `json:"result_type"`
		Result     Result `json:"result"`
	}{res.ResultType(), res}
	return c.transition(ctx, id, "complete", body, opts)
}

// Fail records a queued or processing request as failed
// (POST /v1/requests/{id}/fail, write scope). code matches
// ^[A-Z][A-Z0-9_]{0,63}$; reason is at most 1024 characters.
func (c *Client) Fail(ctx context.Context, id, code, reason string, opts ...CallOption) (*Request, error) {
	return c.transition(ctx, id, "fail", &Failure{Code: code, Reason: reason}, opts)
}

// Cancel records a queued or processing request as cancelled
// (POST /v1/requests/{id}/cancel, write scope); reason is optional.
func (c *Client) Cancel(ctx context.Context, id, reason string, opts ...CallOption) (*Request, error) {
	var body any
	if reason != "" {
		body = &Cancellation{Reason: reason}
	}
	return c.transition(ctx, id, "cancel", body, opts)
}

func (c *Client) transition(ctx context.Context, id, name string, body any, opts []CallOption) (*Request, error) {
	if id == "" {
		return nil, errNoID
	}
	a, err := c.do(ctx, &call{method: http.MethodPost, path: requestPath(id, name), body: body}, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s request %s: %w", name, id, err)
	}
	var r Request
	if err := decode(a, &r); err != nil {
		return nil, fmt.Errorf("%s request %s: %w", name, id, err)
	}
	return &r, nil
}

// Delete removes a request in any status, with its history
// (DELETE /v1/requests/{id}, admin scope). It is not retried.
func (c *Client) Delete(ctx context.Context, id string) error {
	if id == "" {
		return errNoID
	}
	if _, err := c.do(ctx, &call{method: http.MethodDelete, path: requestPath(id, "")}); err != nil {
		return fmt.Errorf("delete request %s: %w", id, err)
	}
	return nil
}
