package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// answer is one HTTP exchange with the service.
type answer struct {
	op, tenant  string
	id          string // the request it was about, when known (path, or a create's 2xx body)
	start, end  time.Time
	code        int
	problem     string // the problem's code, for 4xx/5xx
	retryAfter  string
	contentType string
	err         error // transport error: no answer at all
}

func (a answer) latency() time.Duration { return a.end.Sub(a.start) }

func (a answer) String() string {
	if a.err != nil {
		return fmt.Sprintf("%s %s at %s: no answer after %s: %v", a.op, a.tenant, a.start.Format("15:04:05.000"), a.latency(), a.err)
	}
	return fmt.Sprintf("%s %s at %s: %d %s in %s", a.op, a.tenant, a.start.Format("15:04:05.000"), a.code, a.problem, a.latency())
}

// client talks to the service and records every answer.
type client struct {
	base string
	hc   *http.Client

	mu  sync.Mutex
	all []answer
}

func newClient(base string) *client {
	return &client{base: base, hc: &http.Client{
		// Far above any deadline the service has: an answer this late is a hang.
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64},
	}}
}

// request is one call: method and path, credential, optional Idempotency-Key and body.
type request struct {
	op, tenant, method, path string
	key, pollToken, idem     string
	body                     string
}

func (c *client) do(r request) (answer, map[string]any) {
	req, err := http.NewRequest(r.method, c.base+r.path, strings.NewReader(r.body))
	if err != nil {
		panic(err)
	}
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	if r.pollToken != "" {
		req.Header.Set("X-Poll-Token", r.pollToken)
	}
	if r.idem != "" {
		req.Header.Set("Idempotency-Key", r.idem)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	a := answer{op: r.op, tenant: r.tenant, start: time.Now()}
	if rest, ok := strings.CutPrefix(r.path, "/v1/requests/"); ok {
		a.id, _, _ = strings.Cut(rest, "/")
	}
	res, err := c.hc.Do(req)
	var body map[string]any
	if err != nil {
		a.err = err
	} else {
		b, rerr := io.ReadAll(res.Body)
		res.Body.Close()
		a.code, a.retryAfter, a.contentType = res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("Content-Type")
		if rerr != nil {
			a.err = fmt.Errorf("reading the body: %w", rerr)
		}
		_ = json.Unmarshal(b, &body)
		if a.code >= 400 {
			a.problem, _ = body["code"].(string)
		}
		if id, ok := body["id"].(string); ok && a.id == "" && a.code < 300 {
			a.id = id
		}
	}
	a.end = time.Now()
	c.mu.Lock()
	c.all = append(c.all, a)
	c.mu.Unlock()
	return a, body
}

// answers returns a copy of every answer so far.
func (c *client) answers() []answer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

// Ranks of what was acknowledged about a request: a later state never ranks lower.
const (
	rankQueued = iota + 1
	rankProcessing
	rankSucceeded
	rankDeleted
)

var statusRank = map[string]int{"queued": rankQueued, "processing": rankProcessing, "succeeded": rankSucceeded}

// ack is the most a request was acknowledged (2xx) to have reached.
type ack struct {
	tenant  string
	rank    int
	version float64
	// maybeDeleted: a delete was sent but its outcome is unknown (503).
	maybeDeleted bool
}

// ledger keeps every acknowledged write.
type ledger struct {
	mu   sync.Mutex
	acks map[string]*ack
	ids  []string // requests that are never deleted, for readers
	n    int      // acknowledged writes
}

// sample returns a random acknowledged request that will not be deleted, or "".
func (l *ledger) sample() (id, tenant string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ids) == 0 {
		return "", ""
	}
	id = l.ids[mathrand.IntN(len(l.ids))]
	return id, l.acks[id].tenant
}

// keep records a request the load will never delete, for readers.
func (l *ledger) keep(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, id)
}

func (l *ledger) ack(id, tenant string, rank int, version float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.acks == nil {
		l.acks = map[string]*ack{}
	}
	a := l.acks[id]
	if a == nil {
		a = &ack{tenant: tenant}
		l.acks[id] = a
	}
	a.rank, a.version = max(a.rank, rank), max(a.version, version)
	l.n++
}

func (l *ledger) maybeDeleted(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks[id].maybeDeleted = true
}

// writes is the number of acknowledged writes and of requests they touched.
func (l *ledger) writes() (acks, requests int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, len(l.acks)
}

// load drives the service with workers, each making requests and taking them
// through create, poll (by token), processing, events, complete, and some
// through list and delete, retrying a step after a 503 with the same
// Idempotency-Key (docs/reference.md §11: a retry is safe).
type load struct {
	c      *client
	keys   map[string]string // tenant -> API key
	ledger *ledger
	// retryPause between attempts of a step after a 503.
	retryPause time.Duration
	cycles     atomic.Int64
}

// run starts workers spread over the tenants, and as many readers, and returns a
// function that stops them and waits until they have.
func (l *load) run(workers int) (stop func()) {
	tenants := make([]string, 0, len(l.keys))
	for t := range l.keys {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := tenants[i%len(tenants)]
			for ctx.Err() == nil {
				l.cycle(ctx, t, l.keys[t])
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l.read()
				l.pause(ctx)
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// read reads a random request already made: its events, its representation
// (the key's polls are paced: 429 is a normal answer) and a page of the list.
func (l *load) read() {
	id, tenant := l.ledger.sample()
	if id == "" {
		return
	}
	key := l.keys[tenant]
	path := "/v1/requests/" + id
	switch mathrand.IntN(3) {
	case 0:
		l.c.do(request{op: "events", tenant: tenant, method: "GET", path: path + "/events", key: key})
	case 1:
		l.c.do(request{op: "poll", tenant: tenant, method: "GET", path: path, key: key})
	default:
		l.c.do(request{op: "list", tenant: tenant, method: "GET", path: "/v1/requests?limit=5", key: key})
	}
}

func randomKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// retryable: an answer after which the same step is tried again.
func retryable(a answer) bool { return a.err == nil && (a.code == 503 || a.code == 429) }

func (l *load) pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(l.retryPause):
	}
}

// step sends r until it is acknowledged (want) or ctx ends; it returns the
// acknowledged body, or nil.
func (l *load) step(ctx context.Context, r request, want int) map[string]any {
	r.idem = randomKey()
	for ctx.Err() == nil {
		a, body := l.c.do(r)
		if a.code == want {
			return body
		}
		if !retryable(a) {
			return nil
		}
		l.pause(ctx)
	}
	return nil
}

func (l *load) cycle(ctx context.Context, tenant, key string) {
	n := l.cycles.Add(1)
	body := l.step(ctx, request{op: "create", tenant: tenant, method: "POST", path: "/v1/requests", key: key,
		body: fmt.Sprintf(`{"type":"fault.test","context":{"n":%d}}`, n)}, 202)
	if body == nil {
		return
	}
	id, _ := body["id"].(string)
	token, _ := body["poll_token"].(string)
	v, _ := body["version"].(float64)
	l.ledger.ack(id, tenant, rankQueued, v)
	if n%5 != 0 {
		l.ledger.keep(id)
	}
	path := "/v1/requests/" + id

	l.c.do(request{op: "poll", tenant: tenant, method: "GET", path: path, pollToken: token})
	if body = l.step(ctx, request{op: "processing", tenant: tenant, method: "POST", path: path + "/processing", key: key,
		body: `{"percent":50,"message":"half way"}`}, 200); body == nil {
		return
	}
	v, _ = body["version"].(float64)
	l.ledger.ack(id, tenant, rankProcessing, v)
	l.c.do(request{op: "events", tenant: tenant, method: "GET", path: path + "/events", key: key})
	if body = l.step(ctx, request{op: "complete", tenant: tenant, method: "POST", path: path + "/complete", key: key,
		body: `{"result_type":"confirmation","result":{"confirmed":true}}`}, 200); body == nil {
		return
	}
	v, _ = body["version"].(float64)
	l.ledger.ack(id, tenant, rankSucceeded, v)
	if n%4 == 0 {
		l.c.do(request{op: "list", tenant: tenant, method: "GET", path: "/v1/requests?limit=5", key: key})
	}
	if n%5 == 0 {
		op := "delete"
		for ctx.Err() == nil {
			a, _ := l.c.do(request{op: op, tenant: tenant, method: "DELETE", path: path, key: key})
			if a.code == 204 || (a.code == 404 && op == opDeleteAgain) {
				// 404 after a 503: the first attempt had deleted it.
				l.ledger.ack(id, tenant, rankDeleted, 0)
				return
			}
			if !retryable(a) {
				return
			}
			l.ledger.maybeDeleted(id)
			op = opDeleteAgain
			l.pause(ctx)
		}
	}
}

// probe asks /healthz and /readyz every interval until stopped.
func (c *client) probe(every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			c.do(request{op: "healthz", method: "GET", path: "/healthz"})
			c.do(request{op: "readyz", method: "GET", path: "/readyz"})
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// checkAnswers fails the test for every answer that is not one docs/reference.md §11 allows: no
// answer at all, a 5xx other than a 503 problem with Retry-After, or an answer
// later than bound. It returns the number of answers by status code.
func checkAnswers(t *testing.T, as []answer, bound time.Duration) map[int]int {
	t.Helper()
	byCode := map[int]int{}
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, a := range as {
		byCode[a.code]++
		switch {
		case a.err != nil:
			report("%s", a)
		case a.latency() > bound:
			report("answer later than %s: %s", bound, a)
		case a.code == 503:
			ra, err := strconv.Atoi(a.retryAfter)
			if a.problem != "BACKEND_UNAVAILABLE" || !strings.HasPrefix(a.contentType, "application/problem+json") || err != nil || ra < 1 {
				report("503 without the BACKEND_UNAVAILABLE problem and Retry-After (%q, %q, %q): %s", a.problem, a.contentType, a.retryAfter, a)
			}
		case a.code >= 500:
			report("%s", a)
		case a.op == "healthz" && a.code != 200:
			report("/healthz must stay 200: %s", a)
		case a.code == 404 && a.op == opDeleteAgain:
		case a.code >= 400 && a.code != 429:
			// 429: pacing of the poll by token; anything else is a wrong answer
			// (a 404 or 409 would mean a lost or doubled write).
			report("unexpected answer: %s", a)
		}
	}
	if bad > 10 {
		t.Errorf("... and %d more bad answers", bad-10)
	}
	return byCode
}

// only returns the answers for which keep is true.
func only(as []answer, keep func(answer) bool) []answer {
	var out []answer
	for _, a := range as {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

// opDeleteAgain is a delete sent again after a 503: a 404 is then a normal answer.
const opDeleteAgain = "delete again"

func isWrite(a answer) bool {
	return a.op == "create" || a.op == "processing" || a.op == "complete" || a.op == "delete" || a.op == opDeleteAgain
}

func isRead(a answer) bool { return a.op == "poll" || a.op == "events" || a.op == "list" }

// wantOnly503 fails the test for every answer but /healthz's that was sent at
// or after from and answered before to and is not a 503 (when, its message),
// and returns those answers.
func wantOnly503(t *testing.T, as []answer, from, to time.Time, when string) []answer {
	t.Helper()
	during := only(as, func(a answer) bool {
		return a.op != "healthz" && !a.start.Before(from) && a.end.Before(to)
	})
	for _, a := range during {
		if a.code != 503 {
			t.Errorf("%s: %s, want 503", when, a)
		}
	}
	return during
}

// outage is the stretch of 503s a fault caused: from the start of the first
// 503 answered after the fault began to the end of the last one answered before
// normal answers came back, and how many 503s there were in between. (On a busy
// machine a Redis call may miss its deadline at other times too; those 503s are
// allowed but not counted.)
func outage(as []answer, fault, back time.Time) (from, to time.Time, n int) {
	for _, a := range as {
		if a.code != 503 || a.end.Before(fault) || a.end.After(back) {
			continue
		}
		if n == 0 || a.start.Before(from) {
			from = a.start
		}
		if a.end.After(to) {
			to = a.end
		}
		n++
	}
	return from, to, n
}

// firstOK is when the first 2xx answer to a request sent at or after t arrived.
func firstOK(as []answer, t time.Time) (time.Time, bool) {
	var best time.Time
	for _, a := range as {
		if a.code >= 200 && a.code < 300 && !a.start.Before(t) && (best.IsZero() || a.end.Before(best)) {
			best = a.end
		}
	}
	return best, !best.IsZero()
}

// verify reads every request the ledger holds, once it is safe to (Redis back),
// and counts acknowledged writes that are not there: a record missing, in an
// earlier status or at a lower version than was acknowledged, or present after
// its delete was acknowledged. keys are keys that never polled those requests,
// so that no read is paced.
func (l *ledger) verify(t *testing.T, c *client, keys map[string]string) (checked, lost int) {
	t.Helper()
	l.mu.Lock()
	acks := make(map[string]ack, len(l.acks))
	for id, a := range l.acks {
		acks[id] = *a
	}
	l.mu.Unlock()
	for id, a := range acks {
		var res answer
		var body map[string]any
		for attempt := 0; attempt < 50; attempt++ {
			res, body = c.do(request{op: "verify", tenant: a.tenant, method: "GET", path: "/v1/requests/" + id, key: keys[a.tenant]})
			if res.code != 503 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		checked++
		switch {
		case res.code == 404 && (a.rank == rankDeleted || a.maybeDeleted):
		case res.code == 404:
			lost++
			t.Errorf("LOST: request %s (%s) was acknowledged up to rank %d, version %v; now 404", id, a.tenant, a.rank, a.version)
		case res.code != 200:
			t.Errorf("verify %s: %s", id, res)
		case a.rank == rankDeleted:
			lost++
			t.Errorf("LOST: the delete of %s (%s) was acknowledged; the request is still there", id, a.tenant)
		default:
			st, _ := body["status"].(string)
			v, _ := body["version"].(float64)
			if statusRank[st] < a.rank || v < a.version {
				lost++
				t.Errorf("LOST: request %s (%s) was acknowledged up to rank %d, version %v; now %s, version %v", id, a.tenant, a.rank, a.version, st, v)
			}
		}
	}
	return checked, lost
}

// waitWrites waits until some write sent after since was acknowledged, or fails
// the test after timeout.
func (l *load) waitWrites(t *testing.T, since time.Time, timeout time.Duration) {
	t.Helper()
	for {
		if _, ok := firstOK(only(l.c.answers(), isWrite), since); ok {
			return
		}
		if time.Since(since) > timeout {
			t.Fatalf("no write acknowledged within %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
