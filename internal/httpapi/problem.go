package httpapi

import (
	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/problem"
)

// problemBody is an RFC 9457 body with our extensions.
type problemBody struct {
	Type      string              `json:"type"`
	Title     string              `json:"title"`
	Status    int                 `json:"status"`
	Detail    string              `json:"detail"`
	Instance  string              `json:"instance"`
	Code      domain.Code         `json:"code"`
	RequestID string              `json:"request_id"`
	Errors    []domain.FieldError `json:"errors,omitempty"`
	Request   *domain.Request     `json:"request,omitempty"`
}

// answerError answers err (nil: nothing to do) with errorHandler, or with a
// bare 500 when even that fails.
func (s *Server) answerError(c *fiber.Ctx, err error) {
	if err == nil {
		return
	}
	if herr := s.errorHandler(c, err); herr != nil {
		_ = c.SendStatus(fiber.StatusInternalServerError)
	}
}

// errorHandler is Fiber's ErrorHandler: every error answer leaves through here.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	de := s.toDomain(c, err)
	info, _ := problem.For(de.Code)
	s.countProblem(c, de.Code)
	switch de.Code {
	case domain.Internal:
		s.log.Error("internal error", "err", err, "method", c.Method(), "path", c.Path(), "request_id", s.requestID(c))
		de.Message = "Internal error."
	case domain.BackendUnavailable:
		s.log.Warn("backend unavailable", "err", err, "method", c.Method(), "path", c.Path(), "request_id", s.requestID(c))
	}
	if de.RetryAfterSeconds > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(de.RetryAfterSeconds))
	}
	switch de.Code {
	case domain.Unauthenticated:
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="asyncstatus"`)
	case domain.MethodNotAllowed:
		c.Set(fiber.HeaderAllow, strings.Join(s.allowed(c.Path()), ", "))
	case domain.NotFound:
		// Every "not visible" 404 carries the same headers (docs/reference.md §2): the
		// rate limit headers are set on some paths to it (an id the store
		// looked up) and not on others (a malformed id, a wrong poll
		// token), so none carries them. The call is still counted.
		h := &c.Response().Header
		for _, k := range rateLimitHeaders {
			h.Del(k)
		}
	}
	s.cors.setHeaders(c) // also for errors fasthttp raises before any middleware
	if googlePath(c.Path()) {
		return s.writeGoogleError(c, de, info.Status) // the Operations routes (google.go)
	}
	instance := c.OriginalURL()
	if len(c.Context().QueryArgs().Peek(queryPollToken)) > 0 {
		instance = c.Path() // the stream route's query may carry a credential
	}
	p := problemBody{
		Type:      info.Type,
		Title:     info.Title,
		Status:    info.Status,
		Detail:    de.Message,
		Instance:  instance,
		Code:      de.Code,
		RequestID: s.requestID(c),
		Errors:    de.Fields,
		Request:   de.Request,
	}
	body, mErr := s.json.Marshal(p)
	if mErr != nil {
		return c.Status(500).SendString("internal error")
	}
	c.Set(fiber.HeaderContentType, "application/problem+json")
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(info.Status).Send(body)
}

// toDomain turns any error (ours or Fiber's) into a domain.Error.
func (s *Server) toDomain(c *fiber.Ctx, err error) *domain.Error {
	var de *domain.Error
	if errors.As(err, &de) {
		return de
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusNotFound:
			return domain.Errorf(domain.NotFound, "No such route.")
		case fiber.StatusMethodNotAllowed:
			return domain.Errorf(domain.MethodNotAllowed, "This route does not accept %s.", c.Method())
		case fiber.StatusRequestEntityTooLarge:
			return domain.Errorf(domain.PayloadTooLarge, "The request body is larger than %d bytes.", s.opts.BodyLimitBytes)
		case fiber.StatusUnsupportedMediaType:
			return domain.Errorf(domain.UnsupportedMediaType, "Send the body as application/json.")
		case fiber.StatusBadRequest, fiber.StatusRequestHeaderFieldsTooLarge, fiber.StatusRequestURITooLong:
			return domain.Errorf(domain.ValidationFailed, "The request could not be read.")
		case fiber.StatusRequestTimeout:
			return domain.Errorf(domain.ValidationFailed, "The request was not received in time.")
		}
	}
	return &domain.Error{Code: domain.Internal, Message: "Internal error.", Err: err}
}
