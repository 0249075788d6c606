package httpapi

import (
	"github.com/gofiber/fiber/v2"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// view is what a poll answers of a request: the representation (docs/reference.md
// §3), or one of the two views for standard long-running-operation clients
// (§15). Every view is the same read, paced, counted, compared with
// If-None-Match and held by Prefer: wait alike (pollAs); only the encoder differs.
type view uint8

const (
	viewRequest   view = iota // §3
	viewMonitor               // Azure status monitor (azure.go)
	viewOperation             // google.longrunning.Operation (google.go)
)

// namesURLs reports whether the view carries an absolute URL, whose base a
// parked answer must keep (its own context has no Host).
func (v view) namesURLs() bool { return v == viewMonitor }

// writeView answers 200 with r in view v, its ETag and no caching. The
// representation goes through writeRequest unchanged.
func (s *Server) writeView(c *fiber.Ctx, v view, r *domain.Request) error {
	if v == viewRequest {
		return s.writeRequest(c, fiber.StatusOK, r)
	}
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	var body []byte
	var err error
	switch v {
	case viewMonitor:
		var resource string
		if r.Status == domain.StatusSucceeded {
			resource = s.requestURL(c, r.ID)
		}
		body, err = wire.AppendMonitor((*bp)[:0], r, resource)
	default:
		body, err = wire.AppendOperation((*bp)[:0], r)
	}
	return s.sendVersioned(c, fiber.StatusOK, bp, body, err, r.Version)
}
