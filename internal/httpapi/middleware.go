package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
)

const (
	localState    = "asyncstatus_state"
	headerPollTok = "X-Poll-Token"
	headerIdemKey = "Idempotency-Key"
	headerReqID   = "X-Request-Id"
)

// reqState is what the middlewares keep about one request, in one Locals
// entry holding a pointer: boxing the id and the principal into Locals cost an
// allocation each per request, and the states are pooled.
type reqState struct {
	id         string
	principal  domain.Principal
	problem    domain.Code // the code of an error answer, for the access log
	hasProblem bool
	// bodyRead: a route asked for the body (edge.go); body holds it when it
	// was streamed, in a buffer of the server's pool.
	bodyRead bool
	body     *[]byte
	// start is when observe saw the request; parked: a long poll that
	// answers after the handler returned (park.go), which observe leaves to
	// record to the parked wait.
	start  time.Time
	parked bool
	// rate is the rate limit the call was counted on, by the store (through
	// the Call's Rate) or by the middleware's limiter (countCall);
	// authenticate writes its headers (writeRate).
	rate domain.RateInfo
	// base overrides the URLs' base (baseURL) of a parked answer.
	base string
}

// withState is the first middleware: it gives the request its state and id,
// and answers the errors of the routes itself (as Fiber would with the same
// ErrorHandler) so that the state is still there for the error handler and
// goes back to the pool once the answer is written. On a panic the state is
// not pooled: the recover middleware's error answer still reads it.
func (s *Server) withState(c *fiber.Ctx) error {
	st := s.states.Get().(*reqState)
	*st = reqState{}
	s.initState(c, st)
	err := s.checkFraming(c)
	if err == nil {
		err = c.Next()
	}
	s.answerError(c, err)
	s.finishBody(c, st)
	c.Locals(localState, nil)
	s.states.Put(st)
	return nil
}

// state is the request's state, made on first use: answers that fasthttp
// refuses before any middleware (an oversized body) get one too.
func (s *Server) state(c *fiber.Ctx) *reqState {
	if st, ok := c.Locals(localState).(*reqState); ok {
		return st
	}
	st := &reqState{}
	s.initState(c, st)
	return st
}

// initState honours a sane X-Request-Id or makes an id, and sets both.
func (s *Server) initState(c *fiber.Ctx, st *reqState) {
	c.Locals(localState, st)
	if id := c.Get(headerReqID); saneToken(id, 128) {
		st.id = utils.CopyString(id)
		setCanonical(c, canonRequestID, c.Request().Header.Peek(headerReqID))
		return
	}
	var b [24]byte
	s.ids.next(&b)
	st.id = string(b[:])
	setCanonical(c, canonRequestID, b[:])
}

// requestID is the request's id.
func (s *Server) requestID(c *fiber.Ctx) string { return s.state(c).id }

// idSource makes request ids: a random per-process prefix and a counter, 24
// hex digits, the width of 96 random bits. They only correlate log lines
// and answers; they are not secrets, so crypto/rand per request (and its
// hex string) is not needed. The prefix keeps replicas apart (48 bits).
type idSource struct {
	prefix [12]byte
	seq    atomic.Uint64
}

func newIDSource() *idSource {
	var r [6]byte
	_, _ = rand.Read(r[:]) // never fails since Go 1.24
	s := &idSource{}
	hex.Encode(s.prefix[:], r[:])
	return s
}

// next writes the next id into b.
func (s *idSource) next(b *[24]byte) {
	n := s.seq.Add(1)
	copy(b[:12], s.prefix[:])
	for i := len(b) - 1; i >= 12; i-- {
		b[i] = hexDigits[n&0xf]
		n >>= 4
	}
}

const hexDigits = "0123456789abcdef"

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

// rateCredential names whom a rate limit counts: the API key id, or "pt:" and
// the request a poll token is for. The middleware's limiter and the store's
// scripts count on the same names, so the same counters.
func rateCredential(p domain.Principal) string {
	if p.KeyID != "" {
		return p.KeyID
	}
	return "pt:" + p.PollTokenFor
}

// call is the caller of c's store call (domain.Call): its tenant and key id,
// the counters it is counted on (when the store counts them: authedCounted),
// and the request's state as where the counted limit goes, whose RateLimit-*
// headers authenticate writes once the handler returns.
func (s *Server) call(c *fiber.Ctx) domain.Call {
	st := s.state(c)
	p := st.principal
	return domain.Call{Tenant: p.Tenant, By: p.KeyID, Credential: rateCredential(p), Rate: &st.rate}
}

// pathID is the {id} of c's path, copied: c.Params is a view of a buffer
// fasthttp reuses for the next request, and what the store is given may
// outlive the handler (an abandoned autopipelined call, a parked wait's
// request, the hub's maps). The principal's strings are the caller's own
// too (authorize), so the store clones nothing.
func pathID(c *fiber.Ctx) string { return utils.CopyString(c.Params("id")) }

// principal is the authenticated caller; zero before authentication.
func principal(c *fiber.Ctx) domain.Principal {
	if st, ok := c.Locals(localState).(*reqState); ok {
		return st.principal
	}
	return domain.Principal{}
}

// authed authenticates the caller, checks the scope the route needs and counts the
// call against the rate limits. pollToken lets X-Poll-Token stand in for a key.
func (s *Server) authed(need domain.Scopes, pollToken bool) fiber.Handler {
	return s.authenticate(need, pollToken, s.limit)
}

// authedCounted is authed for a route whose store call counts the rate limits
// itself when the store says it does (Requests.CountsRateLimits): then the
// middleware does not count it again.
func (s *Server) authedCounted(need domain.Scopes, pollToken bool) fiber.Handler {
	if s.reqs.CountsRateLimits(need.String()) {
		return s.authenticate(need, pollToken, nil)
	}
	return s.authed(need, pollToken)
}

// authedPoll is authedCounted for the poll route.
func (s *Server) authedPoll() fiber.Handler { return s.authedCounted(domain.ScopeRead, true) }

// writeRate writes the RateLimit-* headers of the limit the call was counted
// on, if it was (docs/reference.md §5): authenticate, once the handler is
// done, and park and detachStream, before they take the headers along.
func (s *Server) writeRate(c *fiber.Ctx) {
	r := &s.state(c).rate
	if r.Limit <= 0 {
		return
	}
	reset := max(int64((time.Until(r.Reset)+time.Second-1)/time.Second), 0)
	c.Set(rateLimitHeaders[0], strconv.FormatInt(r.Limit, 10))
	c.Set(rateLimitHeaders[1], strconv.FormatInt(max(r.Remaining, 0), 10))
	c.Set(rateLimitHeaders[2], strconv.FormatInt(reset, 10))
}

// rateLimitHeaders are the headers of a counted call (docs/reference.md §5).
var rateLimitHeaders = [...]string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}

// authenticate authenticates the caller and checks the scope (authorize),
// runs the handler, and then writes the rate limit the call was counted on:
// the one place the RateLimit-* headers are written for an answer given now.
func (s *Server) authenticate(need domain.Scopes, pollToken bool, limit RateLimiter) fiber.Handler {
	scope := need.String()
	return func(c *fiber.Ctx) error {
		err := s.authorize(c, need, scope, pollToken, limit)
		s.writeRate(c)
		return err
	}
}

// authorize is authenticate's work: it authenticates, checks the scope,
// counts the call (limit, when the store does not count it) and runs the
// handler.
func (s *Server) authorize(c *fiber.Ctx, need domain.Scopes, scope string, pollToken bool, limit RateLimiter) error {
	var p domain.Principal
	var err error
	authz, tok := c.Get(fiber.HeaderAuthorization), ""
	if authz == "" && pollToken { // a key wins: no need to look for a token
		tok = c.Get(headerPollTok)
	}
	switch {
	case authz != "":
		key, ok := bearer(authz)
		if !ok {
			return domain.Errorf(domain.Unauthenticated, "A valid API key is required: Authorization: Bearer <key>.")
		}
		p, err = s.auth.APIKeyFrom(c.UserContext(), key, s.clientAddr(c))
	case tok != "":
		p, err = s.auth.PollTokenPrincipal(tok, c.Params("id"))
		// its tenant and id are views of the header and path (pathID)
		p.Tenant, p.PollTokenFor = utils.CopyString(p.Tenant), utils.CopyString(p.PollTokenFor)
	default:
		return domain.Errorf(domain.Unauthenticated, "A valid API key is required: Authorization: Bearer <key>.")
	}
	if err != nil {
		return err
	}
	if !p.Scopes.Has(need) {
		return domain.Errorf(domain.Forbidden, "This key lacks the %s scope.", scope)
	}
	s.state(c).principal = p
	if limit != nil {
		if err := s.countCall(c, limit, p, need, scope); err != nil {
			return err
		}
		return c.Next()
	}
	err = c.Next()
	if err != nil && s.limit != nil && s.state(c).rate.Limit <= 0 &&
		domain.ErrorCode(err) != domain.BackendUnavailable {
		// Refused before the store counted it (a bad body, query or id, or a
		// refusal the script makes before its rate gate): counted here, on the
		// same counters, so that it carries RateLimit-* as every authenticated
		// answer does (docs/reference.md §5) and a storm of bad calls meets the limits too.
		if cerr := s.countCall(c, s.limit, p, need, scope); cerr != nil && domain.ErrorCode(cerr) == domain.RateLimited {
			return cerr
		}
	}
	return err
}

// countCall counts a call with the middleware's limiter and writes its
// headers. Reads may pass uncounted when the limiter's store fails (Allow
// fails open: the read itself then meets the same Redis); writes and admin
// calls may not (Count): they answer 503 BACKEND_UNAVAILABLE.
func (s *Server) countCall(c *fiber.Ctx, limit RateLimiter, p domain.Principal, need domain.Scopes, scope string) error {
	var d ratelimit.Decision
	if need == domain.ScopeRead {
		d = limit.Allow(c.UserContext(), p.Tenant, rateCredential(p), scope)
	} else {
		var err error
		if d, err = limit.Count(c.UserContext(), p.Tenant, rateCredential(p), scope); err != nil {
			return &domain.Error{Code: domain.BackendUnavailable, Message: "The status store is unavailable; retry later.",
				RetryAfterSeconds: 1, Err: err}
		}
	}
	if d.Limit > 0 {
		s.state(c).rate = domain.RateInfo{Limit: d.Limit, Remaining: d.Remaining, Reset: d.Reset}
	}
	if !d.Allowed {
		wait := int(max((d.RetryAfter+time.Second-1)/time.Second, 1))
		e := domain.Errorf(domain.RateLimited, "Too many requests; retry after %d s.", wait)
		e.RetryAfterSeconds = wait
		return e
	}
	return nil
}

func bearer(h string) (string, bool) {
	scheme, v, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	v = strings.TrimSpace(v)
	return v, v != ""
}
