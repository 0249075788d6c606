package httpapi

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// healthz says the process is up and names its build, so that an operator
// sees which code each replica runs (docs/operations.md, upgrading).
// DocsURL is where GET / sends a reader for the documentation.
const DocsURL = "https://github.com/asyncstatus/asyncstatus/tree/main/docs"

// root answers GET / with where to go next: a person or a tool that finds the
// service by its address learns of the API's description and the docs.
func (s *Server) root(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"service": "asyncstatus", "version": s.opts.Build.Version,
		"openapi": "/openapi.json", "docs": DocsURL, "api": "/v1/requests",
		"health": fiber.Map{"liveness": "/livez", "readiness": "/readyz"}})
}

func (s *Server) healthz(c *fiber.Ctx) error {
	b := s.opts.Build
	return c.JSON(fiber.Map{"status": "ok", "version": b.Version, "revision": b.Revision,
		"modified": b.Modified, "go_version": b.GoVersion})
}

func (s *Server) readyz(c *fiber.Ctx) error {
	if err := s.reqs.Ready(c.UserContext()); err != nil {
		return err
	}
	if f := s.opts.AuditStatus; f != nil {
		ok, detail := f()
		state := "ok"
		if !ok {
			state = "failing"
		}
		return c.JSON(fiber.Map{"status": "ready", "audit": fiber.Map{"status": state, "detail": detail}})
	}
	return c.JSON(fiber.Map{"status": "ready"})
}

// writeRequest answers with a representation, its ETag and no caching. The
// body is what encoding/json makes of r (wire.AppendRequest, without
// reflection), built in a pooled buffer and copied into the response.
func (s *Server) writeRequest(c *fiber.Ctx, status int, r *domain.Request) error {
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	body, err := wire.AppendRequest((*bp)[:0], r)
	return s.sendVersioned(c, status, bp, body, err, r.Version)
}

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

// sendVersioned answers status with the JSON body that an encoder built in the
// pooled buffer bp (or its error), the request version's ETag and no caching.
// A body that outgrew the buffer replaces it unless it is too large to pool.
func (s *Server) sendVersioned(c *fiber.Ctx, status int, bp *[]byte, body []byte, err error, version int64) error {
	if err != nil {
		return err
	}
	if cap(body) <= maxPooledBuf {
		*bp = body
	}
	var tag [22]byte
	setCanonical(c, canonETag, appendETag(tag[:0], version))
	setCanonical(c, canonCacheControl, []byte("no-store"))
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	c.Status(status).Response().SetBody(body) // copies: the buffer goes back to the pool
	return nil
}

// Response header names in the form fasthttp normalises them to (c.Set with
// fiber.HeaderETag writes "Etag"), for setCanonical.
const (
	canonETag         = "Etag"
	canonCacheControl = "Cache-Control"
	canonRetryAfter   = "Retry-After"
	canonRequestID    = "X-Request-Id"
)

// setCanonical is c.Set for a name already normalised, without c.Set's copy
// and normalisation of the name and its string value, which every answer's
// headers would pay again (docs/performance.md, "Why the hot path looks as it
// does").
func setCanonical(c *fiber.Ctx, name string, value []byte) {
	c.Response().Header.SetCanonical([]byte(name), value)
}

// appendETag appends etag(version).
func appendETag(b []byte, version int64) []byte {
	return append(strconv.AppendInt(append(b, '"'), version, 10), '"')
}

// maxPooledBuf bounds the buffers kept in the server's pools.
const maxPooledBuf = 64 << 10

func etag(version int64) string { return string(appendETag(nil, version)) }

// saneHost reports whether host (a Host header) can go into a URL we hand out:
// what the pattern ^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$
// matches, without the regexp (~5% of a create's CPU).
func saneHost(host string) bool {
	name, rest := host, ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return false
		}
		name, rest = host[1:end], host[end+1:]
		if !allIn(name, isHexColonDot) {
			return false
		}
	} else {
		if i := strings.IndexByte(host, ':'); i >= 0 {
			name, rest = host[:i], host[i:]
		}
		if !allIn(name, isNameByte) {
			return false
		}
	}
	if rest == "" {
		return true
	}
	port := rest[1:]
	return rest[0] == ':' && len(port) <= 5 && allIn(port, isDigit)
}

// allIn reports whether s is not empty and every byte of it is in the class.
func allIn(s string, in func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !in(s[i]) {
			return false
		}
	}
	return s != ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isNameByte(c byte) bool {
	return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'z' || c == '.' || c == '-'
}
func isHexColonDot(c byte) bool {
	return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' || c == ':' || c == '.'
}

// requestURL is the absolute URL of a request.
func (s *Server) requestURL(c *fiber.Ctx, id string) string {
	return s.baseURL(c) + "/v1/requests/" + id
}

// baseURL is the scheme and authority of the absolute URLs we hand out:
// http.public_url, else the request's own (a parked answer's, kept when it
// was parked).
func (s *Server) baseURL(c *fiber.Ctx) string {
	base := strings.TrimRight(s.opts.PublicURL, "/")
	if base != "" {
		return base
	}
	if st, ok := c.Locals(localState).(*reqState); ok && st.base != "" {
		return st.base
	}
	host := c.Hostname() // X-Forwarded-Host only from a trusted proxy
	if !saneHost(host) {
		host = "localhost"
	}
	return scheme(c) + "://" + host
}

// scheme is the scheme clients reach the service by: https over TLS, else
// what a trusted proxy says in X-Forwarded-Proto when that is http or https
// (a Location of "javascript:" would run in a browser that follows it), else
// http.
func scheme(c *fiber.Ctx) string {
	p := strings.TrimSpace(c.Protocol())
	switch {
	case strings.EqualFold(p, "https"):
		return "https"
	default:
		return "http"
	}
}

func (s *Server) schedule(typ string) []int {
	if v, ok := s.opts.ScheduleByType[typ]; ok && len(v) > 0 {
		return v
	}
	return s.opts.Schedule
}

// createRetryAfter is the estimate clamped into the schedule's range, else its first step.
func (s *Server) createRetryAfter(in domain.CreateInput) int {
	steps := s.schedule(in.Type)
	if in.EstimatedDurationSeconds == 0 {
		return steps[0]
	}
	lo, hi := steps[0], steps[0]
	for _, x := range steps {
		lo, hi = min(lo, x), max(hi, x)
	}
	return min(max(in.EstimatedDurationSeconds, lo), hi)
}

func (s *Server) create(c *fiber.Ctx) error {
	body, err := s.jsonBody(c)
	if err != nil {
		return err
	}
	ik, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	in, err := wire.DecodeCreate(body, s.opts.Limits)
	if err != nil {
		return err
	}
	call := s.call(c)
	r, _, err := s.reqs.Create(c.UserContext(), domain.CreateParams{Call: call, Input: in, IdemKey: ik})
	if err != nil {
		return err
	}
	r.PollToken = s.auth.PollToken(call.Tenant, r.ID)
	u := s.requestURL(c, r.ID)
	c.Set(fiber.HeaderLocation, u)
	c.Set("Operation-Location", u+monitorSuffix) // its status monitor (azure.go)
	if !r.Done {
		retryAfter(c, s.createRetryAfter(in))
	}
	return s.writeRequest(c, fiber.StatusAccepted, r)
}

// poll answers GET /v1/requests/{id}.
func (s *Server) poll(c *fiber.Ctx) error { return s.pollAs(c, viewRequest) }

// pollAs answers a poll of the request in view v (lro.go): a long poll with
// Prefer: wait (wait.go), else an ordinary paced poll.
func (s *Server) pollAs(c *fiber.Ctx, v view) error {
	if s.opts.Waits != nil {
		if n, ok := preferWait(c.Request().Header.PeekAll("Prefer")); ok {
			return s.longPoll(c, n, v)
		}
	}
	return s.pacedPoll(c, v)
}

// preferWait reads the wait preference of the Prefer headers (RFC 7240):
// "wait=N" among comma-separated preferences, each maybe with ";" parameters,
// the name case-insensitive, N digits (maybe quoted). A malformed wait is
// ignored, as RFC 7240 asks of preferences a server does not understand.
func preferWait(headers [][]byte) (int, bool) {
	for _, h := range headers {
		for _, pref := range bytes.Split(h, []byte{','}) {
			pref, _, _ = bytes.Cut(pref, []byte{';'})
			name, val, ok := bytes.Cut(bytes.TrimSpace(pref), []byte{'='})
			if !ok || !bytes.EqualFold(bytes.TrimSpace(name), []byte("wait")) {
				continue
			}
			val = bytes.Trim(bytes.TrimSpace(val), `"`)
			if len(val) == 0 || len(val) > 9 || !allIn(string(val), isDigit) {
				continue
			}
			n, _ := strconv.Atoi(string(val))
			return n, true
		}
	}
	return 0, false
}

func (s *Server) pacedPoll(c *fiber.Ctx, v view) error {
	res, err := s.reqs.Poll(c.UserContext(), s.pollParams(c, true))
	if err != nil {
		return err
	}
	r := res.Request
	if res.RetryAfter > 0 {
		retryAfter(c, res.RetryAfter)
	}
	if match := c.Get(fiber.HeaderIfNoneMatch); match != "" && etagMatches(match, r.Version) {
		return notModified(c, r.Version)
	}
	return s.writeView(c, v, r)
}

// pollParams are the parameters of the caller's poll; paced polls are
// ordinary ones, a wait's reads are not paced (it is never POLLED_TOO_EARLY).
func (s *Server) pollParams(c *fiber.Ctx, paced bool) domain.PollParams {
	pp := domain.PollParams{Call: s.call(c), ID: pathID(c)}
	if paced {
		pp.Caller = pp.By
		if pp.By == "" { // a poll token: one caller per request
			pp.Caller = domain.PollTokenCaller
		}
	}
	return pp
}

// notModified answers 304 to an If-None-Match that names version: its ETag,
// and no-store, as the 200 it stands for.
func notModified(c *fiber.Ctx, version int64) error {
	c.Set(fiber.HeaderETag, etag(version))
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.SendStatus(fiber.StatusNotModified)
}

// etagMatches implements If-None-Match's weak comparison over a list, and "*".
func etagMatches(header string, version int64) bool {
	want := etag(version)
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == want {
			return true
		}
	}
	return false
}

func (s *Server) events(c *fiber.Ctx) error {
	res, err := s.reqs.ReadEvents(c.UserContext(), s.pollParams(c, false))
	if err != nil {
		return err
	}
	evs := res.Request.Events
	if evs == nil {
		evs = []domain.Event{}
	}
	body, err := s.json.Marshal(fiber.Map{"items": evs})
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// transitionParams reads what every transition needs.
func (s *Server) transitionParams(c *fiber.Ctx) ([]byte, domain.TransitionParams, error) {
	body, err := s.jsonBody(c)
	if err != nil {
		return nil, domain.TransitionParams{}, err
	}
	ik, err := idempotencyKey(c)
	if err != nil {
		return nil, domain.TransitionParams{}, err
	}
	return body, domain.TransitionParams{Call: s.call(c), ID: pathID(c), IdemKey: ik}, nil
}

// transition runs one transition handler: read, decode, apply, answer 200.
func transition[In any](s *Server, c *fiber.Ctx, decode func([]byte) (In, error),
	apply func(tp domain.TransitionParams, in In) (*domain.Request, error)) error {
	body, tp, err := s.transitionParams(c)
	if err != nil {
		return err
	}
	in, err := decode(body)
	if err != nil {
		return err
	}
	r, err := apply(tp, in)
	if err != nil {
		return err
	}
	return s.writeRequest(c, fiber.StatusOK, r)
}

func (s *Server) processing(c *fiber.Ctx) error {
	return transition(s, c, wire.DecodeProgress, func(tp domain.TransitionParams, in domain.ProgressInput) (*domain.Request, error) {
		return s.reqs.MarkProcessing(c.UserContext(), tp, in)
	})
}

func (s *Server) complete(c *fiber.Ctx) error {
	decode := func(b []byte) (domain.CompleteInput, error) { return wire.DecodeComplete(b, s.opts.Limits) }
	return transition(s, c, decode, func(tp domain.TransitionParams, in domain.CompleteInput) (*domain.Request, error) {
		return s.reqs.Complete(c.UserContext(), tp, in)
	})
}

func (s *Server) fail(c *fiber.Ctx) error {
	return transition(s, c, wire.DecodeFail, func(tp domain.TransitionParams, in domain.FailInput) (*domain.Request, error) {
		return s.reqs.Fail(c.UserContext(), tp, in)
	})
}

func (s *Server) cancel(c *fiber.Ctx) error {
	return transition(s, c, wire.DecodeCancel, func(tp domain.TransitionParams, in domain.CancelInput) (*domain.Request, error) {
		return s.reqs.Cancel(c.UserContext(), tp, in)
	})
}

func (s *Server) remove(c *fiber.Ctx) error {
	err := s.reqs.Remove(c.UserContext(), domain.TransitionParams{Call: s.call(c), ID: pathID(c)})
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// retryAfter sets a whole-second Retry-After.
func retryAfter(c *fiber.Ctx, sec int) {
	var b [20]byte
	setCanonical(c, canonRetryAfter, strconv.AppendInt(b[:0], int64(sec), 10))
}
