package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestOneRoundTripPerPoll: a poll, authenticated by API key (cached) or poll token,
// with the tenant check and pacing, is exactly one Redis round trip; so is an early
// poll answered 429.
func TestOneRoundTripPerPoll(t *testing.T) {
	e := newEnv(t, nil)
	id, tok := e.mustCreate("acme-rw")
	c := &testenv.RoundTrips{}
	e.rdb.AddHook(c)
	// warm the key cache (one lookup), then count
	if r := e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...); r.code != 200 {
		t.Fatal(r.code)
	}
	e.clock.Add(900 * time.Millisecond) // past the pacing tolerance, within the 1 s key cache
	for _, poll := range []struct {
		name string
		hdr  []string
		want int
	}{
		{"key", e.as("acme-r"), 200},
		{"key early", e.as("acme-r"), 429},
		{"token", []string{"X-Poll-Token", tok}, 200},
		{"token early", []string{"X-Poll-Token", tok}, 429},
	} {
		before := c.Trips.Load()
		if r := e.call("GET", "/v1/requests/"+id, "", poll.hdr...); r.code != poll.want {
			t.Fatalf("%s: %d %s", poll.name, r.code, r.body)
		}
		if got := c.Trips.Load() - before; got != 1 {
			t.Fatalf("%s: %d Redis round trips, want 1", poll.name, got)
		}
	}
}

// TestOneRoundTripPerPollWithRateLimits: with the read limits counted by the poll
// script, a rate-limited poll is still one round trip and carries RateLimit-*.
func TestOneRoundTripPerPollWithRateLimits(t *testing.T) {
	e, lim := envWithPollRate(t, 2)
	id, _ := e.mustCreate("acme-rw")
	c := &testenv.RoundTrips{}
	e.rdb.AddHook(c)
	e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...) // warms the key cache
	e.clock.Add(900 * time.Millisecond)
	before := c.Trips.Load()
	r := e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...)
	if r.code != 200 || r.h.Get("RateLimit-Limit") != "2" || r.h.Get("RateLimit-Remaining") != "0" || r.h.Get("RateLimit-Reset") == "" {
		t.Fatalf("poll: %d %v", r.code, r.h)
	}
	if got := c.Trips.Load() - before; got != 1 {
		t.Fatalf("%d round trips, want 1", got)
	}
	r = e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...)
	wantProblem(t, r, 429, "RATE_LIMITED")
	if r.h.Get("Retry-After") == "" || r.h.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("refused: %v", r.h)
	}
	if len(lim.calls) != 1 || !strings.HasSuffix(lim.calls[0], "/write") {
		t.Fatalf("the middleware limiter counted polls: %v", lim.calls)
	}
}

// TestEarlyPollWithRateLimitsCarriesHeaders: a poll answered 429
// POLLED_TOO_EARLY under counted read limits is still one round trip, has been
// counted, and carries RateLimit-* (docs/reference.md §5: every authenticated answer does).
func TestEarlyPollWithRateLimitsCarriesHeaders(t *testing.T) {
	e, _ := envWithPollRate(t, 10)
	id, _ := e.mustCreate("acme-rw")
	c := &testenv.RoundTrips{}
	e.rdb.AddHook(c)
	r := e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...) // the first poll: paced, warms the key cache
	if r.code != 200 || r.h.Get("RateLimit-Limit") != "10" || r.h.Get("RateLimit-Remaining") != "9" {
		t.Fatalf("first poll: %d %v", r.code, r.h)
	}
	before := c.Trips.Load()
	r = e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...)
	wantProblem(t, r, 429, "POLLED_TOO_EARLY")
	if r.h.Get("Retry-After") != "1" || r.h.Get("RateLimit-Limit") != "10" || r.h.Get("RateLimit-Remaining") != "8" ||
		r.h.Get("RateLimit-Reset") == "" {
		t.Fatalf("early poll: %v", r.h)
	}
	if got := c.Trips.Load() - before; got != 1 {
		t.Fatalf("%d round trips, want 1", got)
	}
}

// envWithPollRate is an env whose poll script counts the read limits: credLimit
// a minute per credential, 100 per tenant; the middleware's limiter (returned)
// counts the other scopes.
func envWithPollRate(t *testing.T, credLimit int64) (*env, *fakeLimiter) {
	t.Helper()
	return envWithRates(t, &ratelimit.Rates{Read: ratelimit.Rate{Limit: credLimit, Period: time.Minute}, Tenant: ratelimit.Rate{Limit: 100, Period: time.Minute}})
}

// envWithRates is an env whose scripts count rates; the middleware's limiter
// (returned, 100 calls) counts the scopes they do not.
func envWithRates(t *testing.T, rates *ratelimit.Rates) (*env, *fakeLimiter) {
	t.Helper()
	e := newEnv(t, nil)
	st, err := store.New(e.rdb, store.Options{Now: e.clock.Now, EarlyTolerance: 0.2, RateLimits: rates})
	if err != nil {
		t.Fatal(err)
	}
	lim := &fakeLimiter{left: 100}
	e.st = st
	e.srv = e.compose(st, time.Minute, lim, app.Options{})
	return e, lim
}

// TestOneRoundTripPerWriteWithRateLimits: with every limit counted by the
// scripts, a create, a transition and a delete are each one Redis round trip,
// counted or refused, carry RateLimit-* from the store, and never reach the
// middleware's limiter; a refused call changes nothing.
func TestOneRoundTripPerWriteWithRateLimits(t *testing.T) {
	minute := func(n int64) ratelimit.Rate { return ratelimit.Rate{Limit: n, Period: time.Minute} }
	e, lim := envWithRates(t, &ratelimit.Rates{Read: minute(100), Write: minute(4), Admin: minute(2), Tenant: minute(100)})
	first, _ := e.mustCreate("acme-rw") // warms the key cache and the tenant registry
	// warm the scripts (a first call may need EVAL) and the admin key: each counted
	e.call("POST", "/v1/requests/"+first+"/processing", "", e.as("acme-rw")...)
	e.call("DELETE", "/v1/requests/00000000-0000-7000-8000-000000000000", "", e.as("acme-admin")...) // 404
	c := &testenv.RoundTrips{}
	e.rdb.AddHook(c)
	call := func(name, method, path, body string, hdr []string, want int) resp {
		t.Helper()
		before := c.Trips.Load()
		r := e.call(method, path, body, hdr...)
		if r.code != want {
			t.Fatalf("%s: %d %s, want %d", name, r.code, r.body, want)
		}
		if got := c.Trips.Load() - before; got != 1 {
			t.Fatalf("%s: %d Redis round trips, want 1", name, got)
		}
		return r
	}
	r := call("create", "POST", "/v1/requests", `{"type":"x"}`, e.as("acme-rw"), 202)
	if r.h.Get("RateLimit-Limit") != "4" || r.h.Get("RateLimit-Remaining") != "1" || r.h.Get("RateLimit-Reset") == "" {
		t.Fatalf("create headers %v", r.h)
	}
	second := r.json(t)["id"].(string)
	r = call("processing", "POST", "/v1/requests/"+first+"/processing", "", e.as("acme-rw"), 200)
	if r.h.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("processing headers %v", r.h)
	}
	r = call("refused create", "POST", "/v1/requests", `{"type":"x"}`, e.as("acme-rw"), 429)
	wantProblem(t, r, 429, "RATE_LIMITED")
	if r.h.Get("Retry-After") == "" || r.h.Get("RateLimit-Limit") != "4" || r.h.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("refused create headers %v", r.h)
	}
	wantProblem(t, call("refused complete", "POST", "/v1/requests/"+second+"/complete", `{"result_type":"answer","result":{}}`,
		e.as("acme-rw"), 429), 429, "RATE_LIMITED")
	if got := e.call("GET", "/v1/requests/"+second, "", e.as("acme-r")...); got.code != 200 || got.json(t)["status"] != "queued" {
		t.Fatalf("the refused complete changed the request: %d %s", got.code, got.body)
	}
	r = call("delete", "DELETE", "/v1/requests/"+first, "", e.as("acme-admin"), 204)
	if r.h.Get("RateLimit-Limit") != "2" || r.h.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("delete headers %v", r.h)
	}
	wantProblem(t, call("refused delete", "DELETE", "/v1/requests/"+second, "", e.as("acme-admin"), 429), 429, "RATE_LIMITED")
	e.clock.Add(2 * time.Second) // past the pacing of the last poll
	if got := e.call("GET", "/v1/requests/"+second, "", e.as("acme-r")...); got.code != 200 {
		t.Fatalf("the refused delete removed the request: %d", got.code)
	}
	for _, c := range lim.calls {
		if !strings.HasSuffix(c, "/read") {
			t.Fatalf("the middleware limiter counted a write or admin call: %v", lim.calls)
		}
	}
}

// TestEventsCountedByTheScript: with the read limits counted by the scripts,
// an events read is one round trip counted on the poll's counters (one read
// budget per credential), carries RateLimit-*, and never reaches the
// middleware's limiter.
func TestEventsCountedByTheScript(t *testing.T) {
	e, lim := envWithPollRate(t, 3)
	id, tok := e.mustCreate("acme-rw")
	c := &testenv.RoundTrips{}
	e.rdb.AddHook(c)
	if r := e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...); r.code != 200 || r.h.Get("RateLimit-Remaining") != "2" {
		t.Fatalf("poll: %d %v", r.code, r.h)
	}
	before := c.Trips.Load()
	r := e.call("GET", "/v1/requests/"+id+"/events", "", e.as("acme-r")...)
	if r.code != 200 || r.h.Get("RateLimit-Limit") != "3" || r.h.Get("RateLimit-Remaining") != "1" || !strings.Contains(string(r.body), `"items"`) {
		t.Fatalf("events: %d %v %s", r.code, r.h, r.body)
	}
	if got := c.Trips.Load() - before; got != 1 {
		t.Fatalf("events: %d round trips, want 1", got)
	}
	e.call("GET", "/v1/requests/"+id+"/events", "", e.as("acme-r")...)
	wantProblem(t, e.call("GET", "/v1/requests/"+id+"/events", "", e.as("acme-r")...), 429, "RATE_LIMITED")
	// the poll token is a credential of its own
	if r := e.call("GET", "/v1/requests/"+id+"/events", "", "X-Poll-Token", tok); r.code != 200 || r.h.Get("RateLimit-Remaining") != "2" {
		t.Fatalf("events by poll token: %d %v", r.code, r.h)
	}
	if len(lim.calls) != 1 || !strings.HasSuffix(lim.calls[0], "/write") {
		t.Fatalf("the middleware limiter counted reads: %v", lim.calls)
	}
}

// TestListingCountedByTheScript: with the read limits counted by the scripts,
// a listing is counted by the listing script itself: no more round trips than
// the listing needs (its script, then the records' MGET), RateLimit-* from
// the store, 429 RATE_LIMITED once the budget is spent, and never the
// middleware's limiter.
func TestListingCountedByTheScript(t *testing.T) {
	e, lim := envWithPollRate(t, 3)
	e.mustCreate("acme-rw")
	c := &testenv.RoundTrips{}
	e.rdb.AddHook(c)
	e.call("GET", "/v1/requests", "", e.as("acme-r")...) // warms the key cache and the script
	before := c.Trips.Load()
	r := e.call("GET", "/v1/requests", "", e.as("acme-r")...)
	if r.code != 200 || r.h.Get("RateLimit-Limit") != "3" || r.h.Get("RateLimit-Remaining") != "1" || r.h.Get("RateLimit-Reset") == "" {
		t.Fatalf("listing: %d %v %s", r.code, r.h, r.body)
	}
	if got := c.Trips.Load() - before; got != 2 {
		t.Fatalf("%d round trips, want 2 (list.lua, MGET)", got)
	}
	e.call("GET", "/v1/requests", "", e.as("acme-r")...)
	r = e.call("GET", "/v1/requests", "", e.as("acme-r")...)
	wantProblem(t, r, 429, "RATE_LIMITED")
	if r.h.Get("Retry-After") == "" || r.h.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("refused listing: %v", r.h)
	}
	for _, c := range lim.calls {
		if strings.HasSuffix(c, "/read") {
			t.Fatalf("the middleware limiter counted a listing: %v", lim.calls)
		}
	}
}

// TestRefusedBeforeTheStoreIsCounted: with every limit counted by the
// scripts, a call refused before the store is reached (a bad body, a bad
// query, a malformed id) is counted by the middleware's limiter instead, so
// that its answer carries RateLimit-* as every authenticated answer does
// (docs/reference.md §5), and over the limit it is 429.
func TestRefusedBeforeTheStoreIsCounted(t *testing.T) {
	minute := func(n int64) ratelimit.Rate { return ratelimit.Rate{Limit: n, Period: time.Minute} }
	e, lim := envWithRates(t, &ratelimit.Rates{Read: minute(100), Write: minute(100), Admin: minute(100), Tenant: minute(1000)})
	lim.left = 3
	for _, c := range []struct {
		method, path, body, key, scope string
		code                           int
		limit                          string // RateLimit-Limit; none on a 404 (docs/reference.md §2: every "not visible" 404 looks alike)
	}{
		{"POST", "/v1/requests", `{"type":`, "acme-rw", "write", 400, "2"},
		{"GET", "/v1/requests?limit=abc", "", "acme-r", "read", 400, "2"},
		{"GET", "/v1/requests/not-an-id", "", "acme-r", "read", 404, ""},
	} {
		n := len(lim.calls)
		r := e.call(c.method, c.path, c.body, e.as(c.key)...)
		if r.code != c.code || r.h.Get("RateLimit-Limit") != c.limit {
			t.Fatalf("%s %s: %d %v", c.method, c.path, r.code, r.h)
		}
		if len(lim.calls) != n+1 || !strings.HasSuffix(lim.calls[n], "/"+c.scope) {
			t.Fatalf("%s %s counted as %v", c.method, c.path, lim.calls[n:])
		}
	}
	// the limiter's budget is spent: the next bad call is turned away as over the limit
	r := e.call("POST", "/v1/requests", `{"type":`, e.as("acme-rw")...)
	wantProblem(t, r, 429, "RATE_LIMITED")
	// a call the store counted does not reach the limiter
	n := len(lim.calls)
	if r := e.call("POST", "/v1/requests", `{"type":"x"}`, e.as("acme-rw")...); r.code != 202 || r.h.Get("RateLimit-Limit") != "100" {
		t.Fatalf("create: %d %v", r.code, r.h)
	}
	if len(lim.calls) != n {
		t.Fatalf("a store-counted create reached the limiter: %v", lim.calls[n:])
	}
}
