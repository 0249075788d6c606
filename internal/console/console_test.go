package console_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

const (
	adminScopes = domain.ScopeRead | domain.ScopeWrite | domain.ScopeAdmin
	noStore     = "no-store"
)

func wantStatus(tb testing.TB, a answer, status int, what string) {
	tb.Helper()
	if a.status != status {
		tb.Fatalf("%s: status %d, want %d\n%s", what, a.status, status, a.body)
	}
}

func wantIn(tb testing.TB, a answer, what string, subs ...string) {
	tb.Helper()
	for _, s := range subs {
		if !strings.Contains(a.body, s) {
			tb.Fatalf("%s: page lacks %q\n%s", what, s, a.body)
		}
	}
}

// TestSignIn: the root redirects to the sign-in page; a wrong key, a key
// without admin, and a form without its token are refused; an operator key
// goes to the tenants page, an admin key to its tenant's requests; the session
// cookie is HttpOnly and SameSite=Strict, Secure over https.
func TestSignIn(t *testing.T) {
	s := newStack(t, miniredis(), stackOptions{})
	op, _ := s.operatorKey(t)
	admin, _ := s.key(t, "acme", adminScopes)
	reader, _ := s.key(t, "acme", domain.ScopeRead|domain.ScopeWrite)

	c := s.client(t)
	a := c.get("/")
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/signin" {
		t.Fatalf("root without session: %d %q", a.status, a.header.Get("Location"))
	}
	page := c.get("/signin")
	wantStatus(t, page, 200, "sign-in page")
	wantIn(t, page, "sign-in page", `<label for="key">API key</label>`, `<button type="submit">Sign in</button>`)

	for name, key := range map[string]string{"wrong": admin[:len(admin)-2] + "xx", "garbage": "hello", "read,write": reader} {
		a := c.signIn(key)
		wantStatus(t, a, http.StatusUnauthorized, name+" key")
		wantIn(t, a, name+" key", "not valid here", `<label for="key">API key</label>`)
	}
	a = c.post("/signin", url.Values{"key": {admin}})
	wantStatus(t, a, http.StatusForbidden, "sign-in without its token")
	a = c.post("/signin", url.Values{"key": {admin}, "csrf": {"forged"}})
	wantStatus(t, a, http.StatusForbidden, "sign-in with a wrong token")

	a = c.signIn(op)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/tenants" {
		t.Fatalf("operator sign-in: %d %q", a.status, a.header.Get("Location"))
	}
	ck := sessionCookie(t, a)
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.MaxAge != 3600 {
		t.Fatalf("session cookie over http: %+v", ck)
	}
	if a := c.get("/"); a.header.Get("Location") != "/tenants" {
		t.Fatalf("root with a session: %q", a.header.Get("Location"))
	}

	c2 := s.client(t)
	page = c2.get("/signin")
	req, _ := http.NewRequest(http.MethodPost, s.url+"/signin",
		strings.NewReader(url.Values{"key": {admin}, "csrf": {csrfOf(t, page.body)}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	a = c2.do(req)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/t/acme/requests" {
		t.Fatalf("admin sign-in: %d %q", a.status, a.header.Get("Location"))
	}
	if ck := sessionCookie(t, a); !ck.Secure {
		t.Fatalf("session cookie over https must be Secure: %+v", ck)
	}
}

func sessionCookie(tb testing.TB, a answer) *http.Cookie {
	tb.Helper()
	for _, ck := range (&http.Response{Header: a.header}).Cookies() {
		if ck.Name == "as_console" {
			return ck
		}
	}
	tb.Fatalf("no session cookie in %v", a.header.Values("Set-Cookie"))
	return nil
}

// TestHeadersOnEveryPage: every answer, pages, refusals, assets and the
// sign-in page alike, carries the CSP, X-Frame-Options and Cache-Control of
// docs/reference.md §14; the CSP allows no other origin, no eval and no inline script.
func TestHeadersOnEveryPage(t *testing.T) {
	s := newStack(t, miniredis(), stackOptions{config: []byte("redis:\n  url: \"\"\n")})
	op, _ := s.operatorKey(t)
	r := s.create(t, "acme", "x")
	c := s.mustSignIn(t, op)
	anon := s.client(t)
	paths := []string{"/tenants", "/t/acme/requests", "/t/acme/requests/" + r.ID, "/t/acme/requests/" + r.ID + "/cancel",
		"/t/acme/requests/" + r.ID + "/delete", "/t/acme/webhooks", "/t/acme/webhooks/wh_none", "/t/acme/keys",
		"/config", "/figures", "/operator-keys", "/t/acme/freeze", "/t/acme/unfreeze", "/nowhere", "/assets/console.css",
		"/assets/console.js"}
	check := func(who string, cl *client, p string) {
		a := cl.get(p)
		h := a.header
		csp := h.Get("Content-Security-Policy")
		if h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != noStore || csp == "" {
			t.Errorf("%s %s (%d): headers %v", who, p, a.status, h)
		}
		for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*"} {
			if strings.Contains(csp, bad) {
				t.Errorf("%s %s: CSP allows %q: %s", who, p, bad, csp)
			}
		}
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") ||
			!strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s %s: CSP %s", who, p, csp)
		}
		if strings.Contains(a.body, "<script>") || strings.Contains(a.body, " onclick=") || strings.Contains(a.body, "style=") {
			t.Errorf("%s %s: inline script or style in the page", who, p)
		}
	}
	for _, p := range append(paths, "/signin", "/") {
		check("operator", c, p)
		check("anonymous", anon, p)
	}
}

// TestCSRF: every form that changes something is refused (403, nothing
// changed) without the session's token or with a wrong one, and also when
// another origin posts it.
func TestCSRF(t *testing.T) {
	s := newStack(t, miniredis(), stackOptions{})
	op, _ := s.operatorKey(t)
	_, keyID := s.key(t, "acme", domain.ScopeRead)
	r := s.create(t, "acme", "x")
	c := s.mustSignIn(t, op)
	token := c.csrf("/tenants")
	other := s.mustSignIn(t, op).csrf("/tenants") // another session's token
	actions := []string{"/t/acme/requests/" + r.ID + "/cancel", "/t/acme/requests/" + r.ID + "/delete",
		"/t/acme/freeze", "/t/acme/keys/" + keyID + "/revoke", "/signout"}
	for _, p := range actions {
		for name, form := range map[string]url.Values{"missing": {}, "wrong": {"csrf": {wrongToken(token)}},
			"another session's": {"csrf": {other}}} {
			wantStatus(t, c.post(p, form), http.StatusForbidden, p+" with the token "+name)
		}
		req, _ := http.NewRequest(http.MethodPost, s.url+p, strings.NewReader(url.Values{"csrf": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		wantStatus(t, c.do(req), http.StatusForbidden, p+" from another origin")
	}
	if st := s.status(t, "acme", r.ID); st != domain.StatusQueued {
		t.Fatalf("a refused form changed the request: %s", st)
	}
	if sum, _ := s.st.TenantSummary(ctx, "acme"); sum.Frozen {
		t.Fatal("a refused form froze the tenant")
	}
	if _, err := s.st.LookupKey(ctx, keyID); err != nil {
		t.Fatalf("a refused form revoked the key: %v", err)
	}
	if a := c.get("/tenants"); a.status != 200 {
		t.Fatalf("a refused sign-out ended the session: %d", a.status)
	}
	// and with the token, they work
	wantStatus(t, c.post("/t/acme/requests/"+r.ID+"/cancel", url.Values{"csrf": {token}}), http.StatusSeeOther, "cancel")
	if st := s.status(t, "acme", r.ID); st != domain.StatusCancelled {
		t.Fatalf("cancel with the token: %s", st)
	}
}

// TestTenantAdminSeesOnlyItsTenant: another tenant's pages, another tenant's
// request id (also through an action), and the operator pages are all the same
// "not found" page as an unknown or malformed id; nothing is changed.
func TestTenantAdminSeesOnlyItsTenant(t *testing.T) {
	s := newStack(t, miniredis(), stackOptions{})
	admin, _ := s.key(t, "acme", adminScopes)
	_, globexKey := s.key(t, "globex", adminScopes)
	mine := s.create(t, "acme", "x")
	theirs := s.create(t, "globex", "x")
	c := s.mustSignIn(t, admin)
	wantStatus(t, c.get("/t/acme/requests/"+mine.ID), 200, "own request")

	ref := c.get("/t/acme/requests/01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a")
	wantStatus(t, ref, http.StatusNotFound, "unknown id")
	for _, p := range []string{"/t/acme/requests/" + theirs.ID, "/t/acme/requests/not-a-uuid", "/t/globex/requests/" + theirs.ID,
		"/t/globex/requests", "/t/globex/keys", "/t/globex/webhooks", "/tenants", "/config", "/figures", "/operator-keys",
		"/t/acme/freeze", "/t/acme/requests/" + theirs.ID + "/cancel", "/t/Bad{Tenant}/requests"} {
		a := c.get(p)
		wantStatus(t, a, http.StatusNotFound, p)
		if a.body != ref.body {
			t.Errorf("%s: the not-found page differs from an unknown id's:\n%s\n----\n%s", p, a.body, ref.body)
		}
	}
	token := c.csrf("/t/acme/requests")
	for _, p := range []string{"/t/acme/requests/" + theirs.ID + "/cancel", "/t/globex/requests/" + theirs.ID + "/cancel",
		"/t/acme/requests/" + theirs.ID + "/delete", "/t/globex/freeze", "/t/acme/keys/" + globexKey + "/revoke",
		"/t/globex/keys/" + globexKey + "/revoke"} {
		a := c.post(p, url.Values{"csrf": {token}})
		wantStatus(t, a, http.StatusNotFound, "POST "+p)
		if a.body != ref.body {
			t.Errorf("POST %s: the not-found page differs", p)
		}
	}
	if st := s.status(t, "globex", theirs.ID); st != domain.StatusQueued {
		t.Fatalf("another tenant's request changed: %s", st)
	}
	if _, err := s.st.LookupKey(ctx, globexKey); err != nil {
		t.Fatalf("another tenant's key was revoked: %v", err)
	}
}

// TestSessionEnds: sign-out ends the session on the server (a kept copy of the
// cookie is refused), a revoked key's session ends within the key cache TTL,
// and a session ends after console.session_ttl; on every backend (with an
// autopipeliner the requests page reads its session in the list's pipeline).
func TestSessionEnds(t *testing.T) {
	for _, be := range testenv.Backends() {
		t.Run(be.Name, func(t *testing.T) { testSessionEnds(t, be) })
	}
}

func testSessionEnds(t *testing.T, be testenv.Backend) {
	clock := testenv.NewClock(time.Now())
	s := newStack(t, be, stackOptions{clock: clock.Now, cacheTTL: 10 * time.Second})
	admin, adminID := s.key(t, "acme", adminScopes)

	t.Run("SignOut", func(t *testing.T) {
		c := s.mustSignIn(t, admin)
		kept := c.hc.Jar.Cookies(mustURL(s.url))
		a := c.post("/signout", url.Values{"csrf": {c.csrf("/t/acme/requests")}})
		if a.status != http.StatusSeeOther || a.header.Get("Location") != "/signin" {
			t.Fatalf("sign-out: %d %q", a.status, a.header.Get("Location"))
		}
		replay := s.client(t)
		replay.hc.Jar.SetCookies(mustURL(s.url), kept)
		a = replay.get("/t/acme/requests")
		wantStatus(t, a, http.StatusUnauthorized, "the old cookie after sign-out")
		wantIn(t, a, "after sign-out", "Sign in")
	})
	// A replica that has served the session before answers the next page
	// ahead of reading the session again (session.go, ahead): it must still
	// refuse a session that ended elsewhere since, at once.
	t.Run("SignOutOnAnotherReplica", func(t *testing.T) {
		other := s.replica(t)
		c := s.mustSignIn(t, admin)
		kept := c.hc.Jar.Cookies(mustURL(s.url))
		there := s.client(t)
		there.base = other
		there.hc.Jar.SetCookies(mustURL(other), kept)
		for range 2 { // the second is answered ahead
			wantStatus(t, there.get("/t/acme/requests"), 200, "the session on the other replica")
		}
		c.post("/signout", url.Values{"csrf": {c.csrf("/t/acme/requests")}})
		a := there.get("/t/acme/requests")
		wantStatus(t, a, http.StatusUnauthorized, "the old cookie on the other replica after sign-out")
		wantIn(t, a, "after sign-out elsewhere", "Sign in")
		if strings.Contains(a.body, "Requests of acme") {
			t.Fatalf("the refused answer shows the page:\n%s", a.body)
		}
	})
	t.Run("EndedInRedis", func(t *testing.T) {
		c := s.mustSignIn(t, admin)
		wantStatus(t, c.get("/t/acme/requests"), 200, "before")
		for _, ck := range c.hc.Jar.Cookies(mustURL(s.url)) {
			if ck.Name == "as_console" {
				d := sha256.Sum256([]byte(ck.Value))
				if err := s.st.DeleteConsoleSession(ctx, hex.EncodeToString(d[:])); err != nil {
					t.Fatal(err)
				}
			}
		}
		wantStatus(t, c.get("/t/acme/requests"), http.StatusUnauthorized, "a session deleted in Redis")
	})
	t.Run("Expired", func(t *testing.T) {
		c := s.mustSignIn(t, admin)
		clock.Add(59 * time.Minute)
		wantStatus(t, c.get("/t/acme/requests"), 200, "before the session TTL")
		clock.Add(2 * time.Minute)
		wantStatus(t, c.get("/t/acme/requests"), http.StatusUnauthorized, "after the session TTL")
	})
	t.Run("Revoked", func(t *testing.T) {
		c := s.mustSignIn(t, admin)
		if err := s.st.RevokeKey(ctx, adminID); err != nil {
			t.Fatal(err)
		}
		clock.Add(11 * time.Second) // past auth.key_cache_ttl
		wantStatus(t, c.get("/t/acme/requests"), http.StatusUnauthorized, "a revoked key's session")
	})
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// TestOneTimeSignInLink: the link signs in once; again, or garbled, it is
// the sign-in page with 401.
func TestOneTimeSignInLink(t *testing.T) {
	s := newStack(t, miniredis(), stackOptions{})
	_, id := s.key(t, "demo", adminScopes)
	link, err := s.console.SignInLink(ctx, s.url, id)
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(link, s.url)
	c := s.client(t)
	a := c.get(path)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/t/demo/requests" {
		t.Fatalf("first use: %d %q", a.status, a.header.Get("Location"))
	}
	wantStatus(t, c.get("/t/demo/requests"), 200, "signed in by the link")
	wantStatus(t, s.client(t).get(path), http.StatusUnauthorized, "second use")
	wantStatus(t, s.client(t).get("/signin/once?t=nonsense"), http.StatusUnauthorized, "garbled token")
	if strings.Contains(s.logs.String(), strings.TrimPrefix(path, "/signin/once?t=")) {
		t.Fatal("the sign-in token reached the log")
	}
}

// TestPages: what each page shows, for an operator over two tenants.
func TestPages(t *testing.T) {
	s := newStack(t, miniredis(), stackOptions{config: []byte("auth:\n  poll_token_secret: '***'\n")})
	op, _ := s.operatorKey(t)
	_, acmeKey := s.key(t, "acme", domain.ScopeRead)
	first := s.create(t, "acme", "report.pdf")
	second := s.create(t, "acme", "report.csv")
	if _, err := s.st.MarkProcessing(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_w"}, ID: first.ID},
		domain.ProgressInput{Progress: json.RawMessage(`{"percent":40,"message":"page 4 of 10"}`)}); err != nil {
		t.Fatal(err)
	}
	s.create(t, "globex", "x")
	c := s.mustSignIn(t, op)

	t.Run("Tenants", func(t *testing.T) {
		a := c.get("/tenants")
		wantStatus(t, a, 200, "tenants")
		wantIn(t, a, "tenants", `data-tenant="acme"`, `data-tenant="globex"`, "Freeze tenant", `<span class="st st-active">active</span>`)
	})
	t.Run("Requests", func(t *testing.T) {
		a := c.get("/t/acme/requests")
		wantStatus(t, a, 200, "requests")
		wantIn(t, a, "requests", first.ID, second.ID, `<span class="st st-processing">processing</span>`,
			`<span class="st st-queued">queued</span> <strong>1</strong>`, "Oldest queued:")
		if strings.Index(a.body, second.ID) > strings.Index(a.body, first.ID) {
			t.Error("requests must be newest first")
		}
		a = c.get("/t/acme/requests?status=processing")
		if !strings.Contains(a.body, `data-id="`+first.ID) || strings.Contains(a.body, `data-id="`+second.ID) {
			t.Errorf("status filter:\n%s", a.body)
		}
		a = c.get("/t/acme/requests?limit=1")
		if !strings.Contains(a.body, `data-id="`+second.ID) || strings.Contains(a.body, `data-id="`+first.ID) {
			t.Fatalf("first page of one:\n%s", a.body)
		}
		next := between(a.body, `rel="next" href="`, `"`)
		a = c.get("/t/acme/requests" + strings.ReplaceAll(next, "&amp;", "&"))
		if !strings.Contains(a.body, `data-id="`+first.ID) || strings.Contains(a.body, `data-id="`+second.ID) {
			t.Fatalf("second page (%s):\n%s", next, a.body)
		}
		wantStatus(t, c.get("/t/acme/requests?status=sleeping"), http.StatusBadRequest, "bad filter")
		wantStatus(t, c.get("/t/acme/requests?cursor=garbled"), http.StatusBadRequest, "bad cursor")
	})
	t.Run("Request", func(t *testing.T) {
		a := c.get("/t/acme/requests/" + first.ID)
		wantStatus(t, a, 200, "request")
		wantIn(t, a, "request", "Cancel request", "Delete request", "40% · page 4 of 10", `class="timeline"`,
			`<span class="st st-queued">queued</span> → <span class="st st-processing">processing</span>`,
			`data-live="/t/acme/requests/`+first.ID+`/live"`, `<noscript><meta http-equiv="refresh"`)
	})
	t.Run("CancelAndDelete", func(t *testing.T) {
		a := c.get("/t/acme/requests/" + second.ID + "/cancel")
		wantStatus(t, a, 200, "cancel confirmation")
		wantIn(t, a, "cancel confirmation", `<button type="submit" class="danger">Confirm</button>`, "/cancel")
		if st := s.status(t, "acme", second.ID); st != domain.StatusQueued {
			t.Fatalf("the confirmation page cancelled: %s", st)
		}
		a = c.post("/t/acme/requests/"+second.ID+"/cancel", url.Values{"csrf": {csrfOf(t, a.body)}})
		wantStatus(t, a, http.StatusSeeOther, "cancel")
		a = c.get("/t/acme/requests/" + second.ID)
		wantIn(t, a, "cancelled request", `<span class="st st-cancelled">cancelled</span>`)
		if strings.Contains(a.body, "Cancel request") || strings.Contains(a.body, "data-live") {
			t.Error("a terminal request offers cancel or stays live")
		}
		a = c.get("/t/acme/requests/" + second.ID + "/delete")
		a = c.post("/t/acme/requests/"+second.ID+"/delete", url.Values{"csrf": {csrfOf(t, a.body)}})
		if a.status != http.StatusSeeOther || a.header.Get("Location") != "/t/acme/requests" {
			t.Fatalf("delete: %d %q", a.status, a.header.Get("Location"))
		}
		wantStatus(t, c.get("/t/acme/requests/"+second.ID), http.StatusNotFound, "a deleted request")
	})
	t.Run("Freeze", func(t *testing.T) {
		a := c.get("/t/globex/freeze")
		wantIn(t, a, "freeze confirmation", "Confirm")
		wantStatus(t, c.post("/t/globex/freeze", url.Values{"csrf": {csrfOf(t, a.body)}}), http.StatusSeeOther, "freeze")
		a = c.get("/tenants")
		wantIn(t, a, "tenants after freeze", "Unfreeze tenant", `<span class="st st-frozen">frozen</span>`)
		a = c.get("/t/globex/requests")
		wantStatus(t, a, http.StatusForbidden, "a frozen tenant's requests")
		wantIn(t, a, "frozen requests page", "Unfreeze tenant", "TENANT_FROZEN")
		a = c.get("/t/globex/unfreeze")
		wantStatus(t, c.post("/t/globex/unfreeze", url.Values{"csrf": {csrfOf(t, a.body)}}), http.StatusSeeOther, "unfreeze")
		wantStatus(t, c.get("/t/globex/requests"), 200, "unfrozen tenant's requests")
	})
	t.Run("Webhooks", func(t *testing.T) {
		w := domain.Webhook{ID: "wh_0123456789abcdef", URL: "https://hooks.example/in", Events: []domain.WebhookEvent{"request.succeeded"},
			Description: "billing", CreatedAt: domain.Time{Time: time.Now()}, SealedSecret: "sealed-not-shown"}
		if err := s.st.SaveWebhook(ctx, domain.Call{Tenant: "acme"}, w, 10); err != nil {
			t.Fatal(err)
		}
		a := c.get("/t/acme/webhooks")
		wantStatus(t, a, 200, "webhooks")
		wantIn(t, a, "webhooks", w.ID, "https://hooks.example/in", "request.succeeded", "billing")
		if strings.Contains(a.body, "sealed-not-shown") {
			t.Fatal("the webhooks page shows the sealed secret")
		}
		a = c.get("/t/acme/webhooks/" + w.ID)
		wantStatus(t, a, 200, "deliveries")
		wantIn(t, a, "deliveries", "No delivery attempt yet.")
		wantStatus(t, c.get("/t/globex/webhooks/"+w.ID), http.StatusNotFound, "another tenant's endpoint")
	})
	t.Run("Keys", func(t *testing.T) {
		a := c.get("/t/acme/keys")
		wantIn(t, a, "keys", acmeKey, "read", "Revoke key")
		a = c.get("/t/acme/keys/" + acmeKey + "/revoke")
		wantStatus(t, c.post("/t/acme/keys/"+acmeKey+"/revoke", url.Values{"csrf": {csrfOf(t, a.body)}}), http.StatusSeeOther, "revoke")
		if _, err := s.st.LookupKey(ctx, acmeKey); domain.ErrorCode(err) != domain.NotFound {
			t.Fatalf("revoked key still there: %v", err)
		}
		a = c.get("/operator-keys")
		wantIn(t, a, "operator keys", "operator", "Revoke key")
	})
	t.Run("ConfigAndFigures", func(t *testing.T) {
		a := c.get("/config")
		wantIn(t, a, "config", "poll_token_secret: &#39;***&#39;")
		s.metrics.RouteSeries("GET", "/v1/requests/:id").Observe(200, 3*time.Millisecond)
		a = c.get("/figures")
		wantIn(t, a, "figures", "answers per second", "429s per second", "p99 latency", `data-live="/figures/live"`)
	})
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}

// TestLiveRequest: the request's live stream sends its state at once, the
// next state when it changes, and ends after the terminal one; without a
// session it is refused like any page.
func TestLiveRequest(t *testing.T) {
	t.Run("Hub", func(t *testing.T) {
		// an hour between re-reads: only the hub's wake-up can be seen in time
		testLiveRequest(t, newStack(t, miniredis(), stackOptions{live: time.Hour}))
	})
	t.Run("Polling", func(t *testing.T) {
		testLiveRequest(t, newStack(t, miniredis(), stackOptions{poll: true}))
	})
}

func testLiveRequest(t *testing.T, s *stack) {
	admin, _ := s.key(t, "acme", adminScopes)
	r := s.create(t, "acme", "x")
	c := s.mustSignIn(t, admin)
	wantStatus(t, s.client(t).get("/t/acme/requests/"+r.ID+"/live"), http.StatusUnauthorized, "live without a session")
	wantStatus(t, c.get("/t/acme/requests/01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a/live"), http.StatusNotFound, "live of an unknown id")

	req, _ := http.NewRequest(http.MethodGet, s.url+"/t/acme/requests/"+r.ID+"/live", nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != noStore {
		t.Fatalf("live headers: %v", resp.Header)
	}
	events := make(chan string)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		var ev strings.Builder
		for sc.Scan() {
			line := sc.Text()
			if line == "" && ev.Len() > 0 {
				events <- ev.String()
				ev.Reset()
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				ev.WriteString(d + "\n")
			}
		}
	}()
	recv := func(what string) string {
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s event within 10s", what)
		}
		return ""
	}
	first := recv("first")
	if !strings.Contains(first, `data-terminal="false"`) || !strings.Contains(first, "st-queued") {
		t.Fatalf("first event:\n%s", first)
	}
	if _, err := s.st.Complete(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_w"}, ID: r.ID},
		domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	last := recv("completed")
	if !strings.Contains(last, `data-terminal="true"`) ||
		!strings.Contains(last, `<span class="st st-queued">queued</span> → <span class="st st-succeeded">succeeded</span>`) {
		t.Fatalf("event after complete:\n%s", last)
	}
	if _, open := <-events; open {
		t.Fatal("the stream must end after the terminal state")
	}
}

// TestNoSecretLeaks: no API key, session cookie value or sign-in token
// appears in a page, a Set-Cookie header, the log, or Redis; cookies hold
// only random session values.
func TestNoSecretLeaks(t *testing.T) {
	s := newStack(t, miniredis(), stackOptions{})
	op, _ := s.operatorKey(t)
	admin, _ := s.key(t, "acme", adminScopes)
	r := s.create(t, "acme", "x")
	var clients []*client
	var sessions []string
	for _, key := range []string{op, admin} {
		c := s.mustSignIn(t, key)
		clients = append(clients, c)
		for _, ck := range c.hc.Jar.Cookies(mustURL(s.url)) {
			if ck.Name == "as_console" {
				sessions = append(sessions, ck.Value)
			}
		}
		for _, p := range []string{"/", "/tenants", "/t/acme/requests", "/t/acme/requests/" + r.ID, "/t/acme/keys",
			"/t/acme/webhooks", "/operator-keys", "/config", "/figures", "/t/acme/requests/" + r.ID + "/delete"} {
			c.get(p)
		}
		c.signIn(key[:len(key)-1] + "x") // a failed sign-in too
	}
	// pages, the log and Redis: no key and no session value
	seen := s.logs.String()
	cookieHeaders := ""
	for _, c := range clients {
		seen += c.seen.String()
		cookieHeaders += c.setCookies.String()
	}
	rdb := s.rdb
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		seen += "\n" + k
		if v, err := rdb.Dump(ctx, k).Result(); err == nil {
			seen += "\n" + v
		}
	}
	for _, secret := range append([]string{op, admin}, sessions...) {
		if strings.Contains(seen, secret) {
			t.Fatalf("a secret (%.8s…) appears in a page, the log or Redis", secret)
		}
	}
	// cookies: a random session value, never a key
	for _, key := range []string{op, admin} {
		if strings.Contains(cookieHeaders, key) {
			t.Fatal("an API key appears in a cookie")
		}
	}
	cookies := sessions
	if len(cookies) < 2 {
		t.Fatalf("cookies: %v", cookies)
	}
}

// TestRequestsPagesApartUnderLoad: pages of two tenants' admins asked at once,
// many times (their bodies are written in reused buffers and held until the
// session is confirmed), each show their own tenant's requests, session and
// CSRF token only; on the embedded store and on a redis-server, whose page
// reads take different paths.
func TestRequestsPagesApartUnderLoad(t *testing.T) {
	for _, be := range testenv.Backends()[:2] {
		t.Run(be.Name, func(t *testing.T) {
			s := newStack(t, be, stackOptions{cacheTTL: 10 * time.Second})
			type tenant struct {
				name, csrf string
				cookies    []*http.Cookie
				ids        []string
			}
			var tenants []*tenant
			for _, name := range []string{"acme", "globex"} {
				key, _ := s.key(t, name, adminScopes)
				c := s.mustSignIn(t, key)
				tn := &tenant{name: name, csrf: c.csrf("/t/" + name + "/requests"), cookies: c.hc.Jar.Cookies(mustURL(s.url))}
				for range 3 {
					tn.ids = append(tn.ids, s.create(t, name, "x").ID)
				}
				tenants = append(tenants, tn)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 25 {
						me, other := tenants[(g+i)%2], tenants[(g+i+1)%2]
						req, _ := http.NewRequest(http.MethodGet, s.url+"/t/"+me.name+"/requests", nil)
						for _, ck := range me.cookies {
							req.AddCookie(ck)
						}
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							errs <- err
							return
						}
						b, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						body := string(b)
						ok := resp.StatusCode == http.StatusOK && strings.Contains(body, "<h1>Requests of "+me.name+"</h1>") &&
							strings.Contains(body, `name="csrf" value="`+me.csrf+`"`) && !strings.Contains(body, other.csrf) &&
							strings.HasSuffix(body, "</html>\n")
						for j := range me.ids {
							ok = ok && strings.Contains(body, me.ids[j]) && !strings.Contains(body, other.ids[j])
						}
						if !ok {
							errs <- fmt.Errorf("%s's page (%d):\n%s", me.name, resp.StatusCode, body)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}

// TestRequestsPageByLabel: the requests page filters by label_selector, shows
// the selector back in its form, and keeps it in the next page's link.
func TestRequestsPageByLabel(t *testing.T) {
	s := newStack(t, miniredis(), stackOptions{config: []byte("auth:\n  poll_token_secret: '***'\n")})
	op, _ := s.operatorKey(t)
	var prod []string
	for i, env := range []string{"prod", "dev", "prod", "prod"} {
		r, _, err := s.st.Create(ctx, domain.CreateParams{
			Call:  domain.Call{Tenant: "acme", By: "key_w"},
			Input: domain.CreateInput{Type: "x", Labels: domain.Labels("env=" + env + ",n=" + string(rune('a'+i)))},
		})
		if err != nil {
			t.Fatal(err)
		}
		if env == "prod" {
			prod = append([]string{r.ID}, prod...)
		}
	}
	c := s.mustSignIn(t, op)
	a := c.get("/t/acme/requests?label_selector=env%3Dprod&limit=2")
	wantStatus(t, a, 200, "requests by label")
	wantIn(t, a, "requests by label", `name="label_selector" value="env=prod"`, `data-id="`+prod[0], `data-id="`+prod[1])
	if strings.Contains(a.body, `data-id="`+prod[2]) {
		t.Fatalf("page of two shows a third:\n%s", a.body)
	}
	next := between(a.body, `rel="next" href="`, `"`)
	a = c.get("/t/acme/requests" + strings.ReplaceAll(next, "&amp;", "&"))
	if !strings.Contains(a.body, `data-id="`+prod[2]) || strings.Contains(a.body, `data-id="`+prod[0]) {
		t.Fatalf("second page (%s):\n%s", next, a.body)
	}
	wantStatus(t, c.get("/t/acme/requests?label_selector=Env%3Dx"), http.StatusBadRequest, "bad selector")
}

// wrongToken is token with its first character changed: never token itself,
// whatever character it starts with.
func wrongToken(token string) string {
	if token[0] == 'x' {
		return "y" + token[1:]
	}
	return "x" + token[1:]
}
