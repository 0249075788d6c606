package console

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Cookie names. The session cookie carries 256 random bits; the server keeps
// only their SHA-256 digest, and derives the CSRF token from them (so a replica
// that never saw the sign-in checks it, and nothing more is stored).
const (
	sessionCookie = "as_console"
	signInCookie  = "as_signin" // double-submit token of the sign-in form
	// signInTokenTTL bounds a one-time sign-in link (SignInLink).
	signInTokenTTL = 15 * time.Minute
)

// current is the signed-in caller of a request.
type current struct {
	domain.ConsoleSession
	plain string // the cookie value: derives the CSRF token, never shown
}

// csrf is the session's CSRF token: an HMAC of a fixed label under the
// session secret. Only the holder of the cookie can compute it.
func (c *current) csrf() string {
	m := hmac.New(sha256.New, []byte(c.plain))
	m.Write([]byte("asyncstatus console csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func digest(plain string) string {
	d := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(d[:])
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// load finds the request's session: nil when there is none, it has expired or
// ended, or its key was revoked (seen within auth.key_cache_ttl) or lost the
// admin scope.
func (s *Server) load(r *http.Request) (*current, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || len(ck.Value) != 43 {
		return nil, nil
	}
	d := digest(ck.Value)
	sess, err := s.st.ConsoleSession(r.Context(), d)
	return s.verify(r.Context(), ck.Value, d, sess, err)
}

// verify is load's verdict on the session record read under d (the digest of
// the cookie value plain): sess and err are that read's result.
func (s *Server) verify(ctx context.Context, plain, d string, sess domain.ConsoleSession, err error) (*current, error) {
	if domain.ErrorCode(err) == domain.NotFound {
		s.seen.forget(d)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	k, found, err := s.auth.KeyByID(ctx, sess.KeyID)
	if err != nil {
		return nil, err
	}
	if !found || k.Operator != sess.Operator || (!k.Operator && (k.Tenant != sess.Tenant || !k.Scopes.Has(domain.ScopeAdmin))) {
		s.seen.forget(d)
		return nil, nil
	}
	s.seen.remember(d, sess)
	return &current{ConsoleSession: sess, plain: plain}, nil
}

// seenSessions are the sessions this replica has lately found valid. They
// let a page start its own reads while its session is read again (ahead),
// instead of after: a page then takes about its reads' time, not a session
// read more (docs/reference.md §14: a page of 50 requests in about the time of one list
// call). An entry never answers alone, so sign-out on any replica, expiry and
// revocation act exactly as without it; and only a cookie that was once
// valid gets the page's reads before its session is known, so a made-up
// cookie costs one session read, like a page without the cache.
type seenSessions struct {
	mu sync.Mutex
	m  map[string]domain.ConsoleSession // by digest of the cookie
}

// maxSeenSessions bounds seenSessions; past it an arbitrary entry goes.
const maxSeenSessions = 4096

func (c *seenSessions) remember(d string, sess domain.ConsoleSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]domain.ConsoleSession)
	}
	if _, ok := c.m[d]; !ok && len(c.m) >= maxSeenSessions {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[d] = sess
}

func (c *seenSessions) forget(d string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, d)
}

func (c *seenSessions) lookup(d string) (domain.ConsoleSession, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sess, ok := c.m[d]
	return sess, ok
}

// ahead answers a page whose cookie names a session seen before: the page
// runs on that session into a held answer while the session is loaded again,
// and the answer goes out only if the load confirms the same session.
// Otherwise answered is false and c, err are the load's result, for the
// ordinary path to answer (sign-in page, or the error). Only pages that read
// (GET, HEAD) and end (not the live streams) are answered ahead. With
// ownRead the page may read the session record itself (view.check), in one of
// its own round trips; when it does not, it is read after the page.
func (s *Server) ahead(w http.ResponseWriter, r *http.Request, h handler, ownRead bool) (answered bool, c *current, err error) {
	ck, cerr := r.Cookie(sessionCookie)
	if cerr != nil || len(ck.Value) != 43 || (r.Method != http.MethodGet && r.Method != http.MethodHead) ||
		strings.HasSuffix(r.Pattern, "/live") {
		c, err = s.load(r)
		return false, c, err
	}
	d := digest(ck.Value)
	seen, ok := s.seen.lookup(d)
	if !ok {
		c, err = s.load(r)
		return false, c, err
	}
	type loaded struct {
		c   *current
		err error
	}
	held := &heldAnswer{header: http.Header{}}
	defer func() { s.bufs.release(held.body) }()
	guess := &current{ConsoleSession: seen, plain: ck.Value}
	v := &view{Session: guess, CSRF: guess.csrf()}
	var got loaded
	if ownRead {
		v.check = &sessionCheck{digest: d}
		h(held, r, v)
		if chk := v.check; chk.read {
			got.c, got.err = s.verify(r.Context(), ck.Value, chk.digest, chk.sess, chk.err)
		} else {
			got.c, got.err = s.load(r)
		}
	} else {
		done := make(chan loaded, 1)
		go func() {
			c, err := s.load(r)
			done <- loaded{c, err}
		}()
		h(held, r, v)
		got = <-done
	}
	if got.err != nil || got.c == nil || got.c.KeyID != seen.KeyID || got.c.Tenant != seen.Tenant || got.c.Operator != seen.Operator {
		return false, got.c, got.err
	}
	if sw, ok := w.(*statusWriter); ok {
		sw.keyID = seen.KeyID
	}
	held.send(w)
	return true, nil, nil
}

// sessionCheck is the read of its session record that a page answered ahead
// may make itself (take, then give what it read), so that the check costs no
// round trip of its own. Its methods do nothing on nil (a page not answered
// ahead, whose session is already known).
type sessionCheck struct {
	digest string
	read   bool
	sess   domain.ConsoleSession
	err    error
}

// take is the digest to read the session record under; "" when there is
// nothing to read.
func (c *sessionCheck) take() string {
	if c == nil {
		return ""
	}
	return c.digest
}

// give hands over what was read under take's digest.
func (c *sessionCheck) give(sess domain.ConsoleSession, err error) {
	if c == nil {
		return
	}
	c.read, c.sess, c.err = true, sess, err
}

// heldAnswer is an answer kept in memory until it may be sent.
type heldAnswer struct {
	header http.Header
	status int
	body   []byte
}

func (a *heldAnswer) Header() http.Header { return a.header }

func (a *heldAnswer) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

func (a *heldAnswer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	a.body = append(a.body, b...)
	return len(b), nil
}

func (a *heldAnswer) send(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range a.header {
		h[k] = v
	}
	w.WriteHeader(cmp.Or(a.status, http.StatusOK))
	_, _ = w.Write(a.body)
}

// buffers are the bodies of pages written in Go, reused: a page of 50 rows is
// over 32 KiB, which Go would allocate (and clear) as a large object each
// time.
type buffers struct{ pool sync.Pool }

func (p *buffers) get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 64<<10)
}

// release takes b back once nothing refers to it (an answer written, or
// dropped).
func (p *buffers) release(b []byte) {
	if cap(b) >= 16<<10 && cap(b) <= 1<<20 {
		p.pool.Put(&b)
	}
}

// writeBody writes body b, taken from bufs: a held answer keeps it as its own
// body (released once sent), anything else copies it at once.
func (p *buffers) writeBody(w http.ResponseWriter, b []byte) {
	if a, ok := w.(*heldAnswer); ok && len(a.body) == 0 {
		a.WriteHeader(http.StatusOK)
		a.body = b
		return
	}
	_, _ = w.Write(b)
	p.release(b)
}

// handler is a page handler that knows its caller.
type handler func(w http.ResponseWriter, r *http.Request, v *view)

// session requires a signed-in caller: without one the answer is 401 and the
// sign-in page; a POST must carry the session's CSRF token (403 without it).
func (s *Server) session(h handler) http.HandlerFunc { return s.sessionWith(h, false) }

// readsOwnSession marks a page that reads its session record itself when it
// is answered ahead (view.check).
const readsOwnSession = true

// sessionWith is session; ownRead is readsOwnSession or not.
func (s *Server) sessionWith(h handler, ownRead bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		answered, c, err := s.ahead(w, r, h, ownRead)
		if answered {
			return
		}
		if err != nil {
			s.failed(w, r, nil, err)
			return
		}
		if c == nil {
			s.signInAs(w, r, http.StatusUnauthorized, "Your session has ended, or you are not signed in. Sign in with an API key.")
			return
		}
		if sw, ok := w.(*statusWriter); ok {
			sw.keyID = c.KeyID
		}
		v := &view{Session: c, CSRF: c.csrf()}
		if r.Method == http.MethodPost && !sameToken(r.PostFormValue("csrf"), v.CSRF) {
			s.refuseAs(w, r, v, http.StatusForbidden, "FORBIDDEN", "The form's security token is missing or wrong. Reload the page and try again.")
			return
		}
		h(w, r, v)
	}
}

// operator requires an operator's session; to anyone else the page does not
// exist.
func (s *Server) operator(h handler) http.HandlerFunc { return s.session(s.onlyOperator(h)) }

// operatorTenant is tenant for operators only (freeze and unfreeze).
func (s *Server) operatorTenant(h handler) http.HandlerFunc { return s.tenant(s.onlyOperator(h)) }

func (s *Server) onlyOperator(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, v *view) {
		if !v.Session.Operator {
			s.notFound(w, r, v)
			return
		}
		h(w, r, v)
	}
}

// tenant requires a session that may see the tenant named in the URL: an
// operator sees every tenant, a tenant admin key its own only; any other
// tenant is the same "not found" page as an unknown id.
func (s *Server) tenant(h handler) http.HandlerFunc { return s.tenantWith(h, false) }

// tenantWith is tenant; ownRead is readsOwnSession or not.
func (s *Server) tenantWith(h handler, ownRead bool) http.HandlerFunc {
	return s.sessionWith(func(w http.ResponseWriter, r *http.Request, v *view) {
		t := r.PathValue("tenant")
		if !auth.ValidTenant(t) || (!v.Session.Operator && t != v.Session.Tenant) {
			s.notFound(w, r, v)
			return
		}
		v.Tenant = t
		h(w, r, v)
	}, ownRead)
}

// home is where a session starts: the tenants page for an operator, the
// tenant's requests for a tenant admin.
func home(c *current) string {
	if c.Operator {
		return "/tenants"
	}
	return "/t/" + c.Tenant + "/requests"
}

func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	c, err := s.load(r)
	if err != nil {
		s.failed(w, r, nil, err)
		return
	}
	if c == nil {
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, home(c), http.StatusSeeOther)
}

func (s *Server) signInPage(w http.ResponseWriter, r *http.Request) {
	s.signInAs(w, r, http.StatusOK, "")
}

// signInAs renders the sign-in form with a fresh double-submit token.
func (s *Server) signInAs(w http.ResponseWriter, r *http.Request, status int, message string) {
	tok, err := randomToken()
	if err != nil {
		s.failed(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Value: tok, Path: "/signin", HttpOnly: true,
		Secure: secure(r), SameSite: http.SameSiteStrictMode, MaxAge: int(time.Hour / time.Second)})
	s.render(w, r, status, "signin", &view{Title: "Sign in", CSRF: tok, Data: map[string]any{"Message": message}})
}

// signIn checks the key and starts a session. A wrong key, or one that may
// not use the console, is 401 with the form again, the same for every reason.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(signInCookie)
	if err != nil || !sameToken(r.PostFormValue("csrf"), ck.Value) {
		s.refuse(w, r, http.StatusForbidden, "FORBIDDEN", "The form's security token is missing or wrong. Reload the page and try again.")
		return
	}
	k, err := s.auth.ConsoleKey(r.Context(), r.PostFormValue("key"))
	if domain.ErrorCode(err) == domain.Unauthenticated {
		s.signInAs(w, r, http.StatusUnauthorized, "That key is not valid here. Use a tenant admin key or an operator key.")
		return
	}
	if err != nil {
		s.failed(w, r, nil, err)
		return
	}
	s.start(w, r, k)
}

// start opens a session for key k and goes home.
func (s *Server) start(w http.ResponseWriter, r *http.Request, k domain.APIKey) {
	plain, err := randomToken()
	if err != nil {
		s.failed(w, r, nil, err)
		return
	}
	sess := domain.ConsoleSession{KeyID: k.ID, Tenant: k.Tenant, Operator: k.Operator,
		Expires: s.opts.Now().Add(s.opts.SessionTTL)}
	if err := s.st.SaveConsoleSession(r.Context(), digest(plain), sess); err != nil {
		s.failed(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: plain, Path: "/", HttpOnly: true, Secure: secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: int(s.opts.SessionTTL / time.Second)})
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Path: "/signin", MaxAge: -1, HttpOnly: true, Secure: secure(r),
		SameSite: http.SameSiteStrictMode})
	if sw, ok := w.(*statusWriter); ok {
		sw.keyID = k.ID
	}
	http.Redirect(w, r, home(&current{ConsoleSession: sess}), http.StatusSeeOther)
}

// signOut ends the session on the server (the cookie is refused from now on,
// wherever a copy of it is) and in the browser.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request, v *view) {
	s.seen.forget(digest(v.Session.plain))
	if err := s.st.DeleteConsoleSession(r.Context(), digest(v.Session.plain)); err != nil {
		s.failed(w, r, v, err)
		return
	}
	s.clearSession(w, r)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

func (s *Server) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure(r),
		SameSite: http.SameSiteStrictMode})
}

// SignInLink makes a one-time sign-in link for key keyID below base (the
// console's URL): the link signs in once, within 15 minutes, and is then dead.
// The token is stored only as its digest. serve prints one for the embedded
// store's demo key, next to the key it already prints (docs/console.md).
func (s *Server) SignInLink(ctx context.Context, base, keyID string) (string, error) {
	tok, err := randomToken()
	if err != nil {
		return "", err
	}
	if err := s.st.SaveSignInToken(ctx, digest(tok), keyID, signInTokenTTL); err != nil {
		return "", err
	}
	return base + "/signin/once?t=" + url.QueryEscape(tok), nil
}

// signInOnce spends a one-time sign-in token. An unknown, spent or expired
// token is the sign-in page with 401.
func (s *Server) signInOnce(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("t")
	refused := func() {
		s.signInAs(w, r, http.StatusUnauthorized, "That sign-in link is not valid (each link works once). Sign in with an API key.")
	}
	if len(tok) != 43 {
		refused()
		return
	}
	id, err := s.st.TakeSignInToken(r.Context(), digest(tok))
	if domain.ErrorCode(err) == domain.NotFound {
		refused()
		return
	}
	if err != nil {
		s.failed(w, r, nil, err)
		return
	}
	k, found, err := s.auth.KeyByID(r.Context(), id)
	if err != nil {
		s.failed(w, r, nil, err)
		return
	}
	if !found || (!k.Operator && !k.Scopes.Has(domain.ScopeAdmin)) {
		refused()
		return
	}
	s.start(w, r, k)
}
