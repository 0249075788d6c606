package httpapi

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// listPage is the body of GET /v1/requests: next_cursor is null on the last page.
type listPage struct {
	Items      []*domain.Request `json:"items"`
	NextCursor *string           `json:"next_cursor"`
}

// list answers one page of the caller's tenant's requests (docs/reference.md §4).
func (s *Server) list(c *fiber.Ctx) error {
	values := map[string][]string{}
	c.Context().QueryArgs().VisitAll(func(k, v []byte) {
		values[string(k)] = append(values[string(k)], string(v)) // string() copies
	})
	if wire.WantsWatch(values) {
		return s.watchList(c, values) // docs/reference.md §16 (watch.go)
	}
	f, err := wire.DecodeListQuery(values)
	if err != nil {
		return err
	}
	f.Call = s.call(c)
	page, err := s.reqs.List(c.UserContext(), f)
	if err != nil {
		return err
	}
	out := listPage{Items: page.Items}
	if out.Items == nil {
		out.Items = []*domain.Request{}
	}
	if page.NextCursor != "" {
		out.NextCursor = &page.NextCursor
		c.Set(fiber.HeaderLink, "<"+s.nextPageURL(c, f, page.NextCursor)+`>; rel="next"`)
	}
	body, err := s.json.Marshal(out)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// nextPageURL is the absolute URL of the next page: the same filters in their
// normalised form, the same limit, and the new cursor.
func (s *Server) nextPageURL(c *fiber.Ctx, f domain.ListFilter, cursor string) string {
	q := url.Values{}
	if f.Type != "" {
		q.Set("type", f.Type)
	}
	if len(f.Statuses) > 0 {
		st := make([]string, len(f.Statuses))
		for i, x := range f.Statuses {
			st[i] = string(x)
		}
		q.Set("status", strings.Join(st, ","))
	}
	if f.CreatedAfter != nil {
		q.Set("created_after", f.CreatedAfter.Format(time.RFC3339Nano))
	}
	if f.CreatedBefore != nil {
		q.Set("created_before", f.CreatedBefore.Format(time.RFC3339Nano))
	}
	if f.LabelSelector != "" {
		q.Set("label_selector", string(f.LabelSelector))
	}
	q.Set("limit", strconv.Itoa(f.Limit))
	q.Set("cursor", cursor)
	// requestURL(c, "") is the collection's URL with a trailing slash.
	return strings.TrimSuffix(s.requestURL(c, ""), "/") + "?" + q.Encode()
}
