package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// labelSelector spells labels as a label_selector: name=value pairs sorted by
// name, joined by ",".
func labelSelector(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		names[i] = n + "=" + labels[n]
	}
	return strings.Join(names, ",")
}

// MaxLookupIDs is the most ids one Lookup takes.
const MaxLookupIDs = 100

// Lookup reads many requests in one call (GET /v1/requests?ids=..., read
// scope): the visible ones among ids (1..MaxLookupIDs), newest first. An id
// the caller may not see (unknown, another tenant's, deleted, expired) is
// simply absent. The service counts it as one read per id.
func (c *Client) Lookup(ctx context.Context, ids []string) ([]*Request, error) {
	if len(ids) == 0 || len(ids) > MaxLookupIDs {
		return nil, fmt.Errorf("look up requests: %d ids, want 1 to %d", len(ids), MaxLookupIDs)
	}
	for _, id := range ids {
		if id == "" || strings.Contains(id, ",") {
			return nil, errors.New("look up requests: an empty id or one holding a comma")
		}
	}
	a, err := c.do(ctx, &call{method: http.MethodGet, path: "/v1/requests", query: url.Values{"ids": {strings.Join(ids, ",")}}})
	if err != nil {
		return nil, fmt.Errorf("look up requests: %w", err)
	}
	var p Page
	if err := decode(a, &p); err != nil {
		return nil, fmt.Errorf("look up requests: %w", err)
	}
	return p.Items, nil
}

// Counts are the numbers of requests in each status.
type Counts struct {
	Queued     int64 `json:"queued"`
	Processing int64 `json:"processing"`
	Succeeded  int64 `json:"succeeded"`
	Failed     int64 `json:"failed"`
	Cancelled  int64 `json:"cancelled"`
	Expired    int64 `json:"expired"`
}

// CountOptions filter Counts. Zero fields do not filter; Type and Label are
// not taken together (the service answers 400).
type CountOptions struct {
	// Type counts requests of this type.
	Type string
	// Label counts requests carrying this one label: [name, value].
	Label *[2]string
	// CreatedAfter and CreatedBefore bound created_at, both inclusive.
	CreatedAfter, CreatedBefore time.Time
}

// Counts reads the exact numbers of the tenant's requests in each status
// (GET /v1/requests/counts, read scope).
func (c *Client) Counts(ctx context.Context, o CountOptions) (*Counts, error) {
	q := url.Values{}
	if o.Type != "" {
		q.Set("type", o.Type)
	}
	if o.Label != nil {
		q.Set("label_selector", o.Label[0]+"="+o.Label[1])
	}
	if !o.CreatedAfter.IsZero() {
		q.Set("created_after", o.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if !o.CreatedBefore.IsZero() {
		q.Set("created_before", o.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	a, err := c.do(ctx, &call{method: http.MethodGet, path: "/v1/requests/counts", query: q})
	if err != nil {
		return nil, fmt.Errorf("count requests: %w", err)
	}
	var n Counts
	if err := decode(a, &n); err != nil {
		return nil, fmt.Errorf("count requests: %w", err)
	}
	return &n, nil
}
