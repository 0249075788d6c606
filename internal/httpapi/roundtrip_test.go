package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
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
// counted, and carries RateLimit-* (spec §5: every authenticated answer does).
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
	e := newEnv(t, nil)
	st, err := store.New(e.rdb, store.Options{Now: e.clock.Now, EarlyTolerance: 0.2,
		PollRate: &store.PollRate{CredentialLimit: credLimit, CredentialWindow: time.Minute, TenantLimit: 100, TenantWindow: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	lim := &fakeLimiter{left: 100}
	e.st = st
	e.srv = httpapi.New(st, auth.New(st, []byte("0123456789abcdef0123456789abcdef"), time.Minute, e.clock.Now), lim,
		httpapi.Options{PollRateInStore: true}, nil)
	return e, lim
}
