package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"mime"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

const (
	localRequestID = "request_id"
	localPrincipal = "principal"
	headerPollTok  = "X-Poll-Token"
	headerIdemKey  = "Idempotency-Key"
	headerReqID    = "X-Request-Id"
)

// requestID honours a sane X-Request-Id or makes one, and returns it.
func (s *Server) requestID(c *fiber.Ctx) error {
	requestID(c)
	return c.Next()
}

// requestID is the request's id, assigned on first use: answers that fasthttp
// refuses before any middleware (an oversized body) get one too.
func requestID(c *fiber.Ctx) string {
	if id, ok := c.Locals(localRequestID).(string); ok {
		return id
	}
	id := c.Get(headerReqID)
	if !saneToken(id, 128) {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	} else {
		id = utils.CopyString(id)
	}
	c.Locals(localRequestID, id)
	c.Set(headerReqID, id)
	return id
}

// saneToken accepts 1..max visible ASCII characters.
func saneToken(v string, max int) bool {
	if v == "" || len(v) > max {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

func principal(c *fiber.Ctx) domain.Principal {
	p, _ := c.Locals(localPrincipal).(domain.Principal)
	return p
}

// authed authenticates the caller, checks the scope the route needs and counts the
// call against the rate limits. pollToken lets X-Poll-Token stand in for a key.
func (s *Server) authed(need domain.Scopes, pollToken bool) fiber.Handler {
	return s.authenticate(need, pollToken, s.limit)
}

// authedPoll is authed for the poll route, whose rate limits the store may count
// inside the poll's own round trip.
func (s *Server) authedPoll() fiber.Handler {
	if s.opts.PollRateInStore {
		return s.authenticate(domain.ScopeRead, true, nil)
	}
	return s.authed(domain.ScopeRead, true)
}

func (s *Server) authenticate(need domain.Scopes, pollToken bool, limit RateLimiter) fiber.Handler {
	scope := need.String()
	return func(c *fiber.Ctx) error {
		var p domain.Principal
		var err error
		authz := c.Get(fiber.HeaderAuthorization)
		tok := c.Get(headerPollTok)
		switch {
		case authz != "":
			key, ok := bearer(authz)
			if !ok {
				return domain.Errorf(domain.Unauthenticated, "A valid API key is required: Authorization: Bearer <key>.")
			}
			p, err = s.auth.APIKey(c.UserContext(), key)
		case tok != "" && pollToken:
			p, err = s.auth.PollTokenPrincipal(tok, c.Params("id"))
		default:
			return domain.Errorf(domain.Unauthenticated, "A valid API key is required: Authorization: Bearer <key>.")
		}
		if err != nil {
			return err
		}
		if !p.Scopes.Has(need) {
			return domain.Errorf(domain.Forbidden, "This key lacks the %s scope.", scope)
		}
		c.Locals(localPrincipal, p)
		if limit != nil {
			cred := p.KeyID
			if cred == "" {
				cred = "pt:" + p.PollTokenFor
			}
			d := limit.Allow(c.UserContext(), p.Tenant, cred, scope)
			for k, v := range d.Headers {
				c.Set(k, v)
			}
			if !d.Allowed {
				e := domain.Errorf(domain.RateLimited, "Too many requests; retry after %d s.", d.RetryAfter)
				e.RetryAfterSeconds = max(d.RetryAfter, 1)
				return e
			}
		}
		return c.Next()
	}
}

func bearer(h string) (string, bool) {
	scheme, v, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	v = strings.TrimSpace(v)
	return v, v != ""
}

// jsonBody returns the body of a POST, refusing a non-JSON media type.
func jsonBody(c *fiber.Ctx) ([]byte, error) {
	body := c.Body()
	ct := c.Get(fiber.HeaderContentType)
	if len(body) == 0 && ct == "" {
		return nil, nil
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
	if raw == "" {
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

// retryAfter sets a whole-second Retry-After.
func retryAfter(c *fiber.Ctx, sec int) {
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(sec))
}
