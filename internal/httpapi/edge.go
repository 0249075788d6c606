package httpapi

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// The open-internet edge (docs/reference.md §7 "Hostile input"): what the server refuses
// before any route runs, and how request bodies are read.
//
// Bodies are streamed (fiber.Config.StreamRequestBody): before a handler runs,
// fasthttp reads at most prefetchBytes of a body, not the Content-Length it
// declares, so a connection that sends headers and then a body slowly, or
// never, holds a small fixed amount of memory until a route has authenticated
// it and asks for its body (requestBody), bounded by http.body_limit_bytes.

// prefetchBytes is how much of a body fasthttp v1.51 reads before the handler
// in streaming mode (readBodyWithStreaming): a body no longer than this has
// arrived whole when the handler runs.
const prefetchBytes = 8 << 10

// checkFraming refuses, before any route, what would make the server and a
// proxy in front of it disagree on where a request ends (RFC 9112 §6.1, §6.3):
// both Content-Length and Transfer-Encoding, Content-Length values that
// differ, or a transfer coding other than chunked. fasthttp would serve such
// a request, letting Transfer-Encoding or the last Content-Length win, and
// keep the connection, so a request hidden in the body would be served next.
// It also refuses a declared body over the limit (as fasthttp did before
// bodies were streamed). Every refusal closes the connection.
//
// Requests with neither header (polls: GETs without a body) skip the scan.
func (s *Server) checkFraming(c *fiber.Ctx) error {
	h := &c.Request().Header
	cl := h.ContentLength()
	if cl == -2 { // neither Content-Length nor a chunked Transfer-Encoding
		return nil
	}
	if msg := badFraming(h.RawHeaders()); msg != "" {
		c.Context().SetConnectionClose()
		return &domain.Error{Code: domain.ValidationFailed, Message: "The request's framing is ambiguous; it is refused.",
			Fields: []domain.FieldError{{Field: "headers", Message: msg}}}
	}
	if cl > s.opts.BodyLimitBytes {
		c.Context().SetConnectionClose()
		return domain.Errorf(domain.PayloadTooLarge, "The request body is larger than %d bytes.", s.opts.BodyLimitBytes)
	}
	return nil
}

// badFraming scans raw request headers and says what is wrong with their
// Content-Length and Transfer-Encoding, or "".
func badFraming(raw []byte) string {
	var length []byte
	lengths, codings := 0, 0
	chunked, differ := true, false
	eachHeader(raw, func(name, value []byte) {
		switch {
		case asciiEqualFold(name, "content-length"):
			differ = differ || lengths > 0 && !bytes.Equal(value, length)
			length = value
			lengths++
		case asciiEqualFold(name, "transfer-encoding"):
			codings++
			chunked = chunked && asciiEqualFold(value, "chunked")
		}
	})
	switch {
	case differ:
		return "Content-Length is given twice with different values"
	case lengths > 0 && codings > 0:
		return "Content-Length and Transfer-Encoding must not both be given"
	case codings > 1 || codings == 1 && !chunked:
		return "Transfer-Encoding must be chunked, once"
	}
	return ""
}

// eachHeader calls f with the name and the trimmed value of every field of
// raw request headers ("Name: value\r\n" lines, as RawHeaders keeps them).
func eachHeader(raw []byte, f func(name, value []byte)) {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if name, value, ok := bytes.Cut(line, []byte(":")); ok {
			f(name, bytes.TrimSpace(value))
		}
	}
}

// headerGiven reports whether the request carries the header lower (a name in
// lower case), even with an empty value, which Peek cannot tell from none.
func headerGiven(c *fiber.Ctx, lower string) bool {
	given := false
	eachHeader(c.Request().Header.RawHeaders(), func(name, _ []byte) {
		given = given || asciiEqualFold(name, lower)
	})
	return given
}

// asciiEqualFold reports whether b is lower, an ASCII string in lower case,
// in any case.
func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// requestBody returns the request's body, read now (up to the body limit)
// if it was streamed. The bytes live until the request's state goes back to
// the pool; decoders copy what they keep.
func (s *Server) requestBody(c *fiber.Ctx) ([]byte, error) {
	req := c.Request()
	st := s.state(c)
	st.bodyRead = true
	if !req.IsBodyStream() {
		return req.Body(), nil
	}
	bp := s.bufs.Get().(*[]byte)
	st.body = bp
	b, err := readLimited(req.BodyStream(), (*bp)[:0], s.opts.BodyLimitBytes)
	if cap(b) <= maxPooledBuf {
		*bp = b[:0]
	}
	switch {
	case errors.Is(err, errBodyTooLarge):
		c.Context().SetConnectionClose()
		return nil, domain.Errorf(domain.PayloadTooLarge, "The request body is larger than %d bytes.", s.opts.BodyLimitBytes)
	case err != nil:
		// A body cut short (read timeout, broken chunk): what follows on
		// the connection cannot be trusted to be a request.
		c.Context().SetConnectionClose()
		return nil, domain.Errorf(domain.ValidationFailed, "The request body could not be read.")
	}
	return b, nil
}

var errBodyTooLarge = errors.New("body too large")

// readLimited appends all of r to dst, failing once it passes limit bytes.
func readLimited(r io.Reader, dst []byte, limit int) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(max(cap(dst), 512), limit+1-len(dst)))
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return dst, errBodyTooLarge
		}
		if errors.Is(err, io.EOF) {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// finishBody runs once a route has answered: a body the route did not read
// (it refused the caller first) may still be arriving, and whatever follows
// it on the connection cannot be told from a request, so the connection is
// closed, unless the body had arrived whole before the route ran.
func (s *Server) finishBody(c *fiber.Ctx, st *reqState) {
	if st.body != nil {
		s.bufs.Put(st.body)
		st.body = nil
	}
	req := c.Request()
	if st.bodyRead || !req.IsBodyStream() {
		return
	}
	if cl := req.Header.ContentLength(); cl < 0 || cl > prefetchBytes {
		c.Context().SetConnectionClose()
	}
}

// contentCoded refuses a body sent with a content coding: decoding gzip or
// brotli would turn a body within the limit into any size (RFC 9110 §8.4: 415).
func contentCoded(c *fiber.Ctx) error {
	v := c.Request().Header.Peek(fiber.HeaderContentEncoding)
	if len(v) == 0 || asciiEqualFold(bytes.TrimSpace(v), "identity") {
		return nil
	}
	return domain.Errorf(domain.UnsupportedMediaType, "Send the body without a Content-Encoding.")
}

// jsonBody returns the body of a POST, refusing a non-JSON media type and
// any content coding.
func (s *Server) jsonBody(c *fiber.Ctx) ([]byte, error) {
	if err := contentCoded(c); err != nil {
		return nil, err
	}
	body, err := s.requestBody(c)
	if err != nil {
		return nil, err
	}
	ct := c.Get(fiber.HeaderContentType)
	if len(body) == 0 && ct == "" {
		return nil, nil
	}
	if ct == fiber.MIMEApplicationJSON { // the usual case: what ParseMediaType (and its params map) would accept
		return body, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !(mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))) {
		return nil, domain.Errorf(domain.UnsupportedMediaType, "Send the body as application/json.")
	}
	return body, nil
}

// idempotencyKey reads Idempotency-Key: 1..255 printable ASCII, bare or as a quoted
// structured-field string ("abc" and abc are the same key).
func idempotencyKey(c *fiber.Ctx) (domain.IdempotencyKey, error) {
	raw := c.Get(headerIdemKey)
	if raw == "" && !headerGiven(c, "idempotency-key") {
		return "", nil
	}
	key, ok := parseIdempotencyKey(raw)
	if !ok {
		return "", &domain.Error{Code: domain.ValidationFailed, Message: "The Idempotency-Key header is not valid.",
			Fields: []domain.FieldError{{Field: "Idempotency-Key", Message: "must be 1 to 255 printable ASCII characters, bare or as a quoted string"}}}
	}
	return domain.IdempotencyKey(key), nil
}

func parseIdempotencyKey(raw string) (string, bool) {
	v := raw
	if v == "" {
		// Given but empty: not the same as no key, which would silently
		// lose the caller its idempotency.
		return "", false
	}
	if v[0] == '"' {
		// A leading quote means a structured-field string; it must be well formed.
		if len(v) < 2 || v[len(v)-1] != '"' {
			return "", false
		}
		var b strings.Builder
		in := v[1 : len(v)-1]
		for i := 0; i < len(in); i++ {
			ch := in[i]
			switch {
			case ch == '\\':
				if i+1 >= len(in) || (in[i+1] != '"' && in[i+1] != '\\') {
					return "", false
				}
				i++
				b.WriteByte(in[i])
			case ch == '"':
				return "", false
			default:
				b.WriteByte(ch)
			}
		}
		v = b.String()
	}
	if v == "" || len(v) > 255 {
		return "", false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", false
		}
	}
	return strings.Clone(v), true
}

// knownMethod reports whether Fiber routes method (it answers anything else
// with a text/plain 400 before any handler).
func knownMethod(m []byte) bool {
	switch string(m) {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodDelete,
		fiber.MethodConnect, fiber.MethodOptions, fiber.MethodTrace, fiber.MethodPatch:
		return true
	}
	return false
}

// refuseUnknownMethods answers a method Fiber does not know (an extension
// method, or a known one in lower case: methods are case-sensitive) as the
// router answers a known method on a route without it: 405 with Allow, or
// 404 when no route has that path.
func (s *Server) refuseUnknownMethods(fs *fasthttp.Server) {
	next := fs.Handler
	fs.Handler = func(ctx *fasthttp.RequestCtx) {
		if knownMethod(ctx.Method()) {
			next(ctx)
			return
		}
		c := s.app.AcquireCtx(ctx)
		defer s.app.ReleaseCtx(c)
		var err error = domain.Errorf(domain.NotFound, "No such route.")
		if len(s.allowed(c.Path())) > 0 {
			err = domain.Errorf(domain.MethodNotAllowed, "This route does not accept %s.", safeMethod(ctx.Method()))
		}
		s.finishBody(c, s.state(c))
		s.answerError(c, err)
	}
}

// safeMethod is a method token fit for a message (a token is visible ASCII;
// anything else is not echoed).
func safeMethod(m []byte) string {
	if !saneToken(string(m), 32) {
		return "this method"
	}
	return string(m)
}

// allowed lists the methods the routes matching path accept, for Allow.
func (s *Server) allowed(path string) []string {
	var out []string
	for _, r := range s.app.GetRoutes(true) {
		if routeMatches(r.Path, path) && !slices.Contains(out, r.Method) {
			out = append(out, r.Method)
		}
	}
	slices.Sort(out)
	return out
}

// routeMatches matches a path against a route pattern of literal segments and
// :params (each one non-empty segment, or one ending in a custom verb, as
// `:id\:cancel`); a trailing slash does not count, as with Fiber's
// StrictRouting off.
func routeMatches(pattern, path string) bool {
	ps := strings.Split(strings.TrimSuffix(pattern, "/"), "/")
	qs := strings.Split(strings.TrimSuffix(path, "/"), "/")
	if len(ps) != len(qs) {
		return false
	}
	for i, p := range ps {
		if strings.HasPrefix(p, ":") {
			_, verb, custom := strings.Cut(p, `\:`)
			if qs[i] == "" || custom && (len(qs[i]) <= len(verb)+1 || !strings.HasSuffix(qs[i], ":"+verb)) {
				return false
			}
		} else if p != qs[i] {
			return false
		}
	}
	return true
}
