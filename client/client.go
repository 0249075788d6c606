package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultUserAgent is sent as User-Agent unless WithUserAgent says otherwise.
const DefaultUserAgent = "asyncstatus-go-client/1"

// Client talks to one asyncstatus service. It is safe for concurrent use; make
// one and share it.
type Client struct {
	base      *url.URL
	apiKey    string
	pollToken string
	hc        *http.Client
	ua        string
	retry     RetryPolicy
	// longPoll records whether the service applied Prefer: wait the last time
	// this client asked (see Wait): 0 unknown, 1 yes, 2 no.
	longPoll atomic.Int32
}

// An Option configures a Client in New.
type Option func(*Client)

// WithAPIKey authenticates every call with this API key
// (Authorization: Bearer). default: none.
//
// Its scopes decide what works: read (Get, List, Events, Wait, Stream), write
// (Create and the transitions), admin (Delete and the webhook calls).
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithPollToken authenticates Get, Events, Wait and Stream with a request's poll
// token (X-Poll-Token), the capability the create answer carries for that one
// request. It is used only when no API key is set. default: none.
func WithPollToken(token string) Option { return func(c *Client) { c.pollToken = token } }

// WithHTTPClient sends every call through hc. default: a client of its own
// with no overall timeout (each call is bounded by its context instead).
//
// A Timeout on hc must be longer than a long poll (WaitOptions.WaitSeconds,
// 25s by default) and a Stream would be cut by it.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithUserAgent sets the User-Agent header. default: DefaultUserAgent.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// WithRetry sets the retry policy of single calls. default: DefaultRetryPolicy().
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// RetryPolicy says how a call that may be retried (see the package doc) is
// retried after a transport error or a 503. Zero fields take their default.
type RetryPolicy struct {
	// MaxAttempts is the number of tries of one call, the first included.
	// default: 4. 1 turns retries off.
	MaxAttempts int
	// MinBackoff is the wait before the first retry; it doubles with every
	// retry, each wait drawn at random between half of it and all of it
	// (jitter), and a longer Retry-After from the service wins. default: 200ms.
	MinBackoff time.Duration
	// MaxBackoff caps every wait, Retry-After included. default: 10s.
	MaxBackoff time.Duration
}

// DefaultRetryPolicy returns the policy of a Client made without WithRetry:
// 4 attempts, backoff from 200ms to 10s.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 4, MinBackoff: 200 * time.Millisecond, MaxBackoff: 10 * time.Second}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	def := DefaultRetryPolicy()
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = def.MaxAttempts
	}
	if p.MinBackoff <= 0 {
		p.MinBackoff = def.MinBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = def.MaxBackoff
	}
	if p.MaxBackoff < p.MinBackoff {
		p.MaxBackoff = p.MinBackoff
	}
	return p
}

// backoff is the jittered wait before retry number n (1 for the first retry),
// at least retryAfter, at most MaxBackoff.
func (p RetryPolicy) backoff(n int, retryAfter time.Duration) time.Duration {
	d := p.MinBackoff
	for i := 1; i < n && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	d = d/2 + rand.N(d/2+1)
	return min(max(d, retryAfter), p.MaxBackoff)
}

// New returns a client of the service at baseURL (scheme and host, and a path
// prefix if the service is mounted under one: "https://status.example").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("asyncstatus client: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("asyncstatus client: base URL %q: want http(s)://host", baseURL)
	}
	c := &Client{base: u, ua: DefaultUserAgent, retry: DefaultRetryPolicy()}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	c.retry = c.retry.withDefaults()
	return c, nil
}

// A CallOption changes one call.
type CallOption func(*call)

// IdempotencyKey sends key as the call's Idempotency-Key (1..255 printable
// ASCII) instead of a random one: the service then replays the first answer to
// any later call with the same key and body, from this process or another.
// Only POST calls carry a key.
func IdempotencyKey(key string) CallOption { return func(c *call) { c.idemKey = key } }

// call is one API call: what to send and how to read the answer.
type call struct {
	method  string
	path    string
	query   url.Values
	body    any // JSON-encoded when non-nil
	header  http.Header
	idemKey string // POST only; made up when empty
	// attempts overrides the retry policy's MaxAttempts (Wait paces itself).
	attempts int
}

// answer is a successful answer: its status, headers and body.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// retryAfter reads Retry-After in whole seconds (the service sends no dates);
// ok is false when it is absent or garbled.
func retryAfter(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		if t, err := http.ParseTime(v); err == nil {
			return max(time.Until(t), 0), true
		}
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// newKey makes a random Idempotency-Key (128 bits).
func newKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails
	return "asc_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// do sends cl, retrying as the package doc says, and returns a 2xx or 304
// answer; any other answer is an *Error.
func (c *Client) do(ctx context.Context, cl *call, opts ...CallOption) (*answer, error) {
	for _, o := range opts {
		o(cl)
	}
	var body []byte
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return nil, fmt.Errorf("encode body: %w", err)
		}
		body = b
	}
	retryable := cl.method == http.MethodGet
	if cl.method == http.MethodPost {
		if cl.idemKey == "" {
			cl.idemKey = newKey()
		}
		retryable = true
	}
	attempts := c.retry.MaxAttempts
	if cl.attempts > 0 {
		attempts = cl.attempts
	}
	if !retryable {
		attempts = 1
	}
	for n := 1; ; n++ {
		a, err := c.once(ctx, cl, body)
		if err == nil {
			return a, nil
		}
		var wait time.Duration
		var apiErr *Error
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &apiErr):
			if apiErr.Status != http.StatusServiceUnavailable {
				return nil, err
			}
			wait = apiErr.RetryAfter
		}
		if n >= attempts {
			return nil, err
		}
		if err := sleep(ctx, c.retry.backoff(n, wait)); err != nil {
			return nil, err
		}
	}
}

// once sends cl one time.
func (c *Client) once(ctx context.Context, cl *call, body []byte) (*answer, error) {
	res, err := c.send(ctx, cl, body, "application/json")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 == 2 || res.StatusCode == http.StatusNotModified {
		return &answer{status: res.StatusCode, header: res.Header, body: b}, nil
	}
	return nil, problemError(res, b)
}

// send sends cl with its credentials and returns the service's answer.
func (c *Client) send(ctx context.Context, cl *call, body []byte, accept string) (*http.Response, error) {
	u := *c.base
	u.Path += cl.path
	if len(cl.query) > 0 {
		u.RawQuery = cl.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range cl.header {
		req.Header[k] = vs
	}
	req.Header.Set("User-Agent", c.ua)
	req.Header.Set("Accept", accept)
	setTraceContext(ctx, req.Header)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.idemKey != "" {
		req.Header.Set("Idempotency-Key", cl.idemKey)
	}
	switch {
	case c.apiKey != "":
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	case c.pollToken != "":
		req.Header.Set("X-Poll-Token", c.pollToken)
	}
	return c.hc.Do(req)
}

// maxAnswer bounds what is read of one answer (a page of 200 requests with
// their contexts and results fits many times over).
const maxAnswer = 64 << 20

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// decode reads a JSON answer into v.
func decode(a *answer, v any) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// requestPath is /v1/requests/{id}[/suffix], the id escaped.
func requestPath(id, suffix string) string {
	p := "/v1/requests/" + url.PathEscape(id)
	if suffix != "" {
		p += "/" + suffix
	}
	return p
}
