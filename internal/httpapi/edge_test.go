package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// listen serves e on a loopback listener until the test ends.
func listen(t *testing.T, e *env) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.srv.App().Listener(ln) }()
	t.Cleanup(func() { _ = e.srv.App().Shutdown() })
	return ln.Addr().String()
}

// rawExchange writes what on a fresh connection and reads every answer until
// the server closes it (or 5 s pass: a connection left open shows as a
// timeout, reported as open).
func rawExchange(t *testing.T, addr, what string) (answers []*http.Response, bodies []string, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, what); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			timedOut := errorsAs(err, &ne) && ne.Timeout()
			return answers, bodies, !timedOut
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		answers, bodies = append(answers, res), append(bodies, string(b))
	}
}

func errorsAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

// TestFramingOverTCP: a request with both Content-Length and
// Transfer-Encoding, or with two different Content-Length values, answers one
// 400 problem+json and the connection is closed, so the request hidden behind
// it is never served (RFC 9112 §6.1, §6.3). So does a body a route refused to
// read (an unauthenticated POST) when it had not arrived whole. Equal
// repeated Content-Length values, and ordinary keep-alive, still work.
func TestFramingOverTCP(t *testing.T) {
	e := newEnv(t, nil)
	addr := listen(t, e)
	const smuggled = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	chunkedSmuggle := "0\r\n\r\n" + smuggled
	auth := "Authorization: Bearer " + e.keys["acme-rw"] + "\r\n"
	for _, c := range []struct {
		name, req string
		status    int
	}{
		{"CL then TE", "POST /v1/requests HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Length: " +
			fmt.Sprint(len(chunkedSmuggle)) + "\r\nTransfer-Encoding: chunked\r\n\r\n" + chunkedSmuggle, 400},
		{"TE then CL", "POST /v1/requests HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n" + chunkedSmuggle, 400},
		{"TE on a GET", "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunkedSmuggle, 400},
		{"two lengths", "POST /v1/requests HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Length: " +
			fmt.Sprint(len(smuggled)) + "\r\nContent-Length: 0\r\n\r\n" + smuggled, 400},
		{"two lengths, last larger", "POST /v1/requests HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: " +
			fmt.Sprint(len(smuggled)) + "\r\n\r\n" + smuggled, 400},
		{"TE gzip", "POST /v1/requests HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + chunkedSmuggle, 400},
		{"unread body", "POST /v1/requests HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20000\r\n\r\n" +
			strings.Repeat(" ", 9000) + smuggled + strings.Repeat(" ", 20000-9000-len(smuggled)), 401},
		{"unread chunked body", "POST /v1/requests HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n", len(smuggled)) + smuggled + "\r\n0\r\n\r\n" + smuggled, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			answers, bodies, closed := rawExchange(t, addr, c.req)
			if len(answers) != 1 {
				t.Fatalf("%d answers, want exactly 1 (the hidden request must not be served): %q", len(answers), bodies)
			}
			if answers[0].StatusCode != c.status || answers[0].Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("answer %d %s, want %d problem+json: %s", answers[0].StatusCode, answers[0].Header.Get("Content-Type"), c.status, bodies[0])
			}
			if !closed {
				t.Fatal("the connection was kept open")
			}
		})
	}
	t.Run("equal lengths and keep-alive", func(t *testing.T) {
		body := `{"type":"x"}`
		req := "POST /v1/requests HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Length: " +
			fmt.Sprint(len(body)) + "\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body
		answers, bodies, _ := rawExchange(t, addr, req+"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if len(answers) != 2 || answers[0].StatusCode != 202 || answers[1].StatusCode != 200 {
			t.Fatalf("want 202 then 200 on one connection, got %d answers: %q", len(answers), bodies)
		}
	})
	t.Run("small unread body keeps the connection", func(t *testing.T) {
		// A body that arrived whole before the route refused the caller
		// leaves nothing behind on the connection.
		answers, bodies, _ := rawExchange(t, addr, "POST /v1/requests HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n{\"type\":\"x\"}"+
			"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if len(answers) != 2 || answers[0].StatusCode != 401 || answers[1].StatusCode != 200 {
			t.Fatalf("want 401 then 200, got %d answers: %q", len(answers), bodies)
		}
	})
}

// TestBodyLimitStreamed: bodies are streamed, yet the decoders see at most
// http.body_limit_bytes: a declared length over it answers 413 before any
// route, a chunked body that grows past it answers 413 too, and one within it
// is served.
func TestBodyLimitStreamed(t *testing.T) {
	e := newEnv(t, func(o *httpapi.Options) { o.BodyLimitBytes = 32 << 10 })
	addr := listen(t, e)
	auth := "Authorization: Bearer " + e.keys["acme-rw"] + "\r\n"
	big := `{"type":"x","context":{"a":"` + strings.Repeat("a", 40<<10) + `"}}`
	chunked := func(body string) string {
		var b strings.Builder
		for len(body) > 0 {
			n := min(len(body), 1000)
			fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
		}
		return b.String() + "0\r\n\r\n"
	}
	for _, c := range []struct {
		name, req string
		status    int
	}{
		{"declared", "POST /v1/requests HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Length: " +
			fmt.Sprint(len(big)) + "\r\n\r\n" + big, 413},
		// refused once the first 8 KiB have come, not the 40 KiB declared
		{"declared, unauthenticated", "POST /v1/requests HTTP/1.1\r\nHost: x\r\nContent-Length: " + fmt.Sprint(len(big)) + "\r\n\r\n" + big[:9000], 413},
		{"chunked", "POST /v1/requests HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(big), 413},
		{"chunked within", "POST /v1/requests HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
			chunked(`{"type":"x","context":{"a":"`+strings.Repeat("b", 3000)+`"}}`), 202},
		{"gzip", "POST /v1/requests HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", 415},
	} {
		t.Run(c.name, func(t *testing.T) {
			answers, bodies, _ := rawExchange(t, addr, c.req)
			if len(answers) != 1 || answers[0].StatusCode != c.status {
				t.Fatalf("want one %d, got %d answers: %q", c.status, len(answers), bodies)
			}
			if c.status >= 400 && answers[0].Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("not problem+json: %v", answers[0].Header)
			}
		})
	}
}

// TestMethodsAndMediaTypes: every 4xx the service itself writes is
// problem+json: an unknown or lower-case method answers 405 with Allow on a
// route (404 elsewhere), a known method a route lacks answers 405 with
// Allow, and a multipart body answers 415 naming the path it was sent to.
func TestMethodsAndMediaTypes(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"get", "/healthz", 405, "GET, HEAD"},
		{"BREW", "/v1/requests", 405, "GET, HEAD, POST"},
		{"PUT", "/v1/requests", 405, "GET, HEAD, POST"},
		{"PATCH", "/v1/requests/0193/", 405, "DELETE, GET, HEAD"},
		{"post", "/v1/requests/x/cancel", 405, "POST"},
		{"BREW", "/nowhere", 404, ""},
	} {
		r := e.call(c.method, c.path, "", e.as("acme-rw")...)
		code := map[int]string{404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}[c.status]
		m := wantProblem(t, r, c.status, code)
		if got := r.h.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
		if m["instance"] != c.path {
			t.Errorf("%s %s: instance %v", c.method, c.path, m["instance"])
		}
	}
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("type", "x")
	_ = w.Close()
	r := e.call("POST", "/v1/requests", buf.String(), append(e.as("acme-rw"), "Content-Type", w.FormDataContentType())...)
	if m := wantProblem(t, r, 415, "UNSUPPORTED_MEDIA_TYPE"); m["instance"] != "/v1/requests" {
		t.Fatalf("multipart: instance %v", m["instance"])
	}
	// A malformed multipart body too (fasthttp would parse it before any route).
	r = e.call("POST", "/v1/requests", "--x\r\nbroken", append(e.as("acme-rw"), "Content-Type", "multipart/form-data; boundary=x")...)
	if m := wantProblem(t, r, 415, "UNSUPPORTED_MEDIA_TYPE"); m["instance"] != "/v1/requests" {
		t.Fatalf("broken multipart: instance %v", m["instance"])
	}
}

// TestEmptyIdempotencyKey: an Idempotency-Key header given empty is refused,
// not taken for no key (which would silently lose the caller idempotency).
func TestEmptyIdempotencyKey(t *testing.T) {
	e := newEnv(t, nil)
	addr := listen(t, e)
	answers, bodies, _ := rawExchange(t, addr, "POST /v1/requests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+e.keys["acme-rw"]+
		"\r\nContent-Type: application/json\r\nIdempotency-Key:\r\nContent-Length: 12\r\nConnection: close\r\n\r\n{\"type\":\"x\"}")
	if len(answers) != 1 || answers[0].StatusCode != 400 || !strings.Contains(bodies[0], `"field":"Idempotency-Key"`) {
		t.Fatalf("want a 400 naming Idempotency-Key, got %d answers: %q", len(answers), bodies)
	}
	for _, hdr := range []string{"Idempotency-Key: \r\n", "Idempotency-Key: \"\"\r\n"} {
		answers, bodies, _ = rawExchange(t, addr, "POST /v1/requests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+e.keys["acme-rw"]+
			"\r\nContent-Type: application/json\r\n"+hdr+"Content-Length: 12\r\nConnection: close\r\n\r\n{\"type\":\"x\"}")
		if len(answers) != 1 || answers[0].StatusCode != 400 {
			t.Fatalf("%q: got %d answers: %q", hdr, len(answers), bodies)
		}
	}
	if r := e.create("acme-rw", `{"type":"x"}`); r.code != 202 {
		t.Fatalf("no key at all: %d", r.code)
	}
}

// TestNotFoundHeaderParity: every "not visible" 404 of docs/reference.md §2 (unknown,
// malformed, another tenant's, deleted, expired by retention; by API key on
// every id route, and by poll token, wrong or right) carries the same set of
// headers, with the read limits counted by the middleware and by the poll
// script alike.
func TestNotFoundHeaderParity(t *testing.T) {
	for _, mode := range []string{"poll rate in store false", "poll rate in store true", "every rate in store"} {
		inStore := mode != "poll rate in store false"
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, nil)
			so := store.Options{Now: e.clock.Now, Retention: time.Hour, OpTimeout: 5 * time.Second, EarlyTolerance: 0.2}
			if inStore {
				so.RateLimits = &ratelimit.Rates{Read: ratelimit.Rate{Limit: 1000, Period: time.Minute}, Tenant: ratelimit.Rate{Limit: 1000, Period: time.Minute}}
				if mode == "every rate in store" {
					so.RateLimits.Write, so.RateLimits.Admin = so.RateLimits.Read, so.RateLimits.Read
				}
			}
			st, err := store.New(e.rdb, so)
			if err != nil {
				t.Fatal(err)
			}
			e.st = st
			e.srv = e.compose(st, time.Minute, &fakeLimiter{left: 1000}, app.Options{})

			u := e.unseeable() // the key cache (1 min) still holds
			e.m.FastForward(time.Hour + time.Second)
			mine, tok, foreign, foreignTok := u.mine, u.mineTok, u.foreign, u.foreignTok
			deleted, deletedTok, expired, expiredTok := u.deleted, u.deletedTok, u.expired, u.expiredTok

			var want []string
			var wantCase string
			check := func(name string, r resp) {
				t.Helper()
				wantProblem(t, r, 404, "NOT_FOUND")
				var got []string
				for k := range r.h {
					got = append(got, k)
				}
				slices.Sort(got)
				if want == nil {
					want, wantCase = got, name
					return
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: headers %v;\n%s: %v", name, got, wantCase, want)
				}
			}
			for _, id := range []string{foreign, "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", "not-a-uuid", deleted, expired} {
				check("poll "+id, e.call("GET", "/v1/requests/"+id, "", e.as("acme-rw")...))
				check("events "+id, e.call("GET", "/v1/requests/"+id+"/events", "", e.as("acme-rw")...))
				check("cancel "+id, e.call("POST", "/v1/requests/"+id+"/cancel", "", e.as("acme-rw")...))
				check("delete "+id, e.call("DELETE", "/v1/requests/"+id, "", e.as("acme-admin")...))
			}
			for name, c := range map[string][2]string{
				"wrong token":             {mine, tok + "x"},
				"malformed token":         {mine, "acme.AAAA"},
				"token of another id":     {foreign, tok},
				"foreign token, wrong id": {mine, foreignTok},
				"token, malformed id":     {"not-a-uuid", tok},
				"right token, deleted":    {deleted, deletedTok},
				"right token, expired":    {expired, expiredTok},
			} {
				check(name, e.call("GET", "/v1/requests/"+c[0], "", "X-Poll-Token", c[1]))
				check(name+" (events)", e.call("GET", "/v1/requests/"+c[0]+"/events", "", "X-Poll-Token", c[1]))
			}
		})
	}
}

// TestMadeUpCredentialsCostNoRedis: an API key whose check fails, and a poll
// token that is not the request's, are refused without a single Redis
// command.
func TestMadeUpCredentialsCostNoRedis(t *testing.T) {
	e := newEnv(t, nil)
	id, tok := e.mustCreate("acme-rw")
	c := &testenv.RoundTrips{}
	e.rdb.AddHook(c)
	real := e.keys["acme-rw"]
	flip := func(s string, i int) string {
		b := []byte(s)
		b[i] = map[bool]byte{true: 'b', false: 'a'}[b[i] == 'a']
		return string(b)
	}
	for _, key := range []string{flip(real, len(real)-1), flip(real, len(real)-10), flip(real, 6), "ask_" + strings.Repeat("a", 66)} {
		r := e.call("GET", "/v1/requests/"+id, "", "Authorization", "Bearer "+key)
		wantProblem(t, r, 401, "UNAUTHENTICATED")
	}
	for _, pt := range []string{flip(tok, len(tok)-1), tok + "x", "acme.AAAA", "globex." + strings.SplitN(tok, ".", 2)[1]} {
		r := e.call("GET", "/v1/requests/"+id, "", "X-Poll-Token", pt)
		wantProblem(t, r, 404, "NOT_FOUND")
	}
	if n := c.Cmds.Load(); n != 0 {
		t.Fatalf("made-up credentials cost %d Redis commands", n)
	}
}

var _ = json.Valid
