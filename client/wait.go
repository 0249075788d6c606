package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WaitOptions tune Wait. A nil *WaitOptions takes every default.
type WaitOptions struct {
	// OnChange is called with every new state Wait sees (a higher version),
	// the first one and the terminal one included, in order, on the goroutine
	// that called Wait. default: nil.
	OnChange func(*Request)
	// RetryAfter is the create answer's Retry-After (Created.RetryAfter). The
	// first poll waits this long, unless this Client has already seen the
	// service apply a long poll (then there is nothing to gain by waiting).
	// default: 0, the first poll goes out at once (a caller's first poll is
	// never early).
	RetryAfter time.Duration
	// WaitSeconds is the long poll asked for with every poll
	// (Prefer: wait=N); the service clamps it to its wait.max (25s by
	// default), and the context's deadline shortens it. Negative: no long
	// poll, polling only. default (0): 25.
	WaitSeconds int
	// MaxBackoff caps the jittered, doubling backoff after a 429 or 503 answer
	// or a transport error; a longer Retry-After from the service is still
	// honoured. default: 30s.
	MaxBackoff time.Duration
	// MaxErrors is how many transport errors and 503 answers in a row make
	// Wait give up with the last of them. default: 10.
	MaxErrors int
}

func (o *WaitOptions) withDefaults() WaitOptions {
	var w WaitOptions
	if o != nil {
		w = *o
	}
	if w.WaitSeconds == 0 {
		w.WaitSeconds = 25
	}
	if w.MaxBackoff <= 0 {
		w.MaxBackoff = 30 * time.Second
	}
	if w.MaxErrors <= 0 {
		w.MaxErrors = 10
	}
	return w
}

// Long-poll knowledge of a Client (Client.longPoll).
const (
	longPollUnknown int32 = iota
	longPollApplied
	longPollIgnored
)

// Wait follows a request until it is terminal and returns its final state
// (GET /v1/requests/{id}, read scope or its poll token). A failed, cancelled
// or expired request is not an error: read its Status.
//
// Every poll asks for a long poll (Prefer: wait), the first one with
// If-None-Match: "0" (no state has version 0) so that it answers at once with
// the current state, the later ones with the last ETag. Where the service applies it
// (its answer carries Preference-Applied), Wait learns of each change at once
// and polls again at once. Where it does not (an older service, a proxy that
// drops the header, a replica at its wait.max_waiters), Wait polls when each
// answer's Retry-After says, sends If-None-Match so that an unchanged request
// costs a 304, after a 429 (POLLED_TOO_EARLY or RATE_LIMITED) waits its
// Retry-After, and after a 503 or a transport error backs off (doubling,
// jittered, capped by MaxBackoff, never shorter than a Retry-After).
//
// Wait returns when the request is terminal, when the context is done (with
// the context's error), or on an error answer other than 429 and 503 (an
// *Error: not found, credentials, ...). With an error it also returns the last
// state it saw, nil if none.
func (c *Client) Wait(ctx context.Context, id string, opts *WaitOptions) (*Request, error) {
	if id == "" {
		return nil, errNoID
	}
	o := opts.withDefaults()
	pace := RetryPolicy{MinBackoff: c.retry.MinBackoff, MaxBackoff: o.MaxBackoff}.withDefaults()
	var (
		last     *Request
		etag     string
		errs     int // transport errors and 503s in a row
		limited  int // 429s in a row
		delay    time.Duration
		lastFail error
	)
	if o.RetryAfter > 0 && c.longPoll.Load() != longPollApplied {
		delay = o.RetryAfter
	}
	fail := func(err error) (*Request, error) {
		return last, fmt.Errorf("wait for request %s: %w", id, err)
	}
	for {
		if err := sleep(ctx, delay); err != nil {
			if lastFail != nil {
				err = errors.Join(err, lastFail)
			}
			return fail(err)
		}
		po := PollOptions{IfNoneMatch: etag}
		if o.WaitSeconds > 0 {
			po.Wait = time.Duration(o.WaitSeconds) * time.Second
			if dl, ok := ctx.Deadline(); ok {
				po.Wait = min(po.Wait, time.Until(dl))
			}
			if etag == "" {
				// A long poll without If-None-Match is held until the first
				// change; the ETag of no version (they start at 1) makes the
				// first answer come at once with the current state.
				po.IfNoneMatch = noVersion
			}
		}
		start := time.Now()
		pr, err := c.Poll(ctx, id, po)
		if err != nil {
			var e *Error
			switch {
			case ctx.Err() != nil:
				return fail(ctx.Err())
			case errors.As(err, &e) && e.Status == http.StatusTooManyRequests:
				limited++
				delay = e.RetryAfter
				if e.Code != CodePolledTooEarly { // a rate limit: back off too
					delay = max(delay, pace.backoff(limited, 0))
				}
				continue
			case errors.As(err, &e) && e.Status != http.StatusServiceUnavailable:
				return fail(err)
			}
			errs++
			lastFail = err
			if errs >= o.MaxErrors {
				return fail(err)
			}
			var ra time.Duration
			if e != nil {
				ra = e.RetryAfter
			}
			delay = max(pace.backoff(errs, 0), ra)
			continue
		}
		errs, limited, lastFail = 0, 0, nil
		if r := pr.Request; r != nil {
			if last == nil || r.Version > last.Version {
				if o.OnChange != nil {
					o.OnChange(r)
				}
			}
			if last == nil || r.Version >= last.Version {
				last = r
			}
			etag = pr.ETag
			if r.Done {
				return last, nil
			}
		}
		switch {
		case pr.LongPolled:
			// Retry-After: 0: wait again at once. Only an answer that came back
			// suspiciously fast without news gets a breather, so that a
			// misbehaving intermediary cannot make this loop spin.
			delay = 0
			if pr.NotModified && time.Since(start) < minLongPoll {
				delay = minLongPoll
			}
		case pr.HasRetryAfter:
			delay = pr.RetryAfter
		default:
			delay = time.Second
		}
	}
}

// noVersion is an ETag that matches no state of any request.
const noVersion = `"0"`

// minLongPoll is the least time between two long polls that brought no news.
const minLongPoll = 100 * time.Millisecond

// PollOptions make one poll conditional or long.
type PollOptions struct {
	// IfNoneMatch is the ETag of the state the caller has (PollResult.ETag):
	// an unchanged request then answers 304, NotModified. default: "".
	IfNoneMatch string
	// Wait asks the service to hold the answer until the request changes, for
	// up to this long (Prefer: wait, whole seconds, at least 1; the service
	// clamps it to wait.max). default: 0, an ordinary poll.
	Wait time.Duration
}

// PollResult is the answer to one Poll.
type PollResult struct {
	// Request is the current state; nil when NotModified.
	Request *Request
	// NotModified: the state is still the one IfNoneMatch named.
	NotModified bool
	// ETag names this state for the next IfNoneMatch.
	ETag string
	// RetryAfter is when the service wants the next poll (HasRetryAfter:
	// whether it said; a terminal answer does not).
	RetryAfter    time.Duration
	HasRetryAfter bool
	// LongPolled: the service applied the wait (Preference-Applied); it may
	// be asked again at once.
	LongPolled bool
}

// Poll is one poll of a request (GET /v1/requests/{id}, read scope or its poll
// token), conditional with IfNoneMatch and long with Wait (docs/reference.md §12). Unlike
// Get it is not retried: a caller that loops over Poll paces itself, as Wait
// does, by the answer's RetryAfter and the errors' (429, 503).
func (c *Client) Poll(ctx context.Context, id string, o PollOptions) (*PollResult, error) {
	if id == "" {
		return nil, errNoID
	}
	h := http.Header{}
	asked := 0
	if o.Wait > 0 {
		asked = max(1, int((o.Wait+time.Second-1)/time.Second))
		h.Set("Prefer", "wait="+strconv.Itoa(asked))
	}
	if o.IfNoneMatch != "" {
		h.Set("If-None-Match", o.IfNoneMatch)
	}
	a, err := c.do(ctx, &call{method: http.MethodGet, path: requestPath(id, ""), header: h, attempts: 1})
	if err != nil {
		return nil, fmt.Errorf("poll request %s: %w", id, err)
	}
	pr := &PollResult{NotModified: a.status == http.StatusNotModified, ETag: a.header.Get("ETag"),
		LongPolled: preferenceApplied(a.header)}
	pr.RetryAfter, pr.HasRetryAfter = retryAfter(a.header)
	if pr.ETag == "" {
		pr.ETag = o.IfNoneMatch
	}
	if asked > 0 {
		if pr.LongPolled {
			c.longPoll.Store(longPollApplied)
		} else {
			c.longPoll.Store(longPollIgnored)
		}
	}
	if !pr.NotModified {
		var r Request
		if err := decode(a, &r); err != nil {
			return nil, fmt.Errorf("poll request %s: %w", id, err)
		}
		pr.Request = &r
	}
	return pr, nil
}

// preferenceApplied reports whether the answer says it applied Prefer: wait.
func preferenceApplied(h http.Header) bool {
	for _, v := range h.Values("Preference-Applied") {
		for _, p := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(name), "wait") {
				return true
			}
		}
	}
	return false
}
