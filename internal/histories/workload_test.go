package histories

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// long makes every configuration run longer, with more clients (make histories).
var long = flag.Bool("histories.long", os.Getenv("ASYNCSTATUS_HISTORIES_LONG") != "", "run the long version of the history tests")

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testenv.Main(m))
}

// size is how long a configuration drives load, and with how many workers.
func size() (time.Duration, int) {
	if *long {
		return 50 * time.Second, 10
	}
	return 20 * time.Second, 6
}

// wakeBound is what the wake-up check allows between an acknowledged change
// and the waiter's answer. The contract's figure is 100 ms at p99 on an idle
// machine; the tests run with -race on a busy shared one, so the check
// allows more and the delays measured are logged.
const wakeBound = 2 * time.Second

// baseEnv is the configuration of every serve of these tests: short Redis
// deadlines, no rate limits (pacing is still on), timers far beyond the run
// (so that nothing but the clients moves a request), quiet logs.
func baseEnv() map[string]string {
	return map[string]string{
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET":       strings.Repeat("f", 32),
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY":          strings.Repeat("w", 32),
		"ASYNCSTATUS_REDIS_OP_TIMEOUT":             "500ms",
		"ASYNCSTATUS_RATELIMIT_ENABLED":            "false",
		"ASYNCSTATUS_POLLING_SCHEDULE":             "1s",
		"ASYNCSTATUS_LIFECYCLE_SWEEP_INTERVAL":     "1s",
		"ASYNCSTATUS_LIFECYCLE_QUEUED_TIMEOUT":     "1h",
		"ASYNCSTATUS_LIFECYCLE_PROCESSING_TIMEOUT": "1h",
		"ASYNCSTATUS_RETENTION_TERMINAL":           "1h",
		"ASYNCSTATUS_IDEMPOTENCY_TTL":              "1h",
		"ASYNCSTATUS_AUTH_KEY_CACHE_TTL":           "5m",
		"ASYNCSTATUS_HTTP_SHUTDOWN_TIMEOUT":        "5s",
		"ASYNCSTATUS_LOG_FORMAT":                   "text",
		"ASYNCSTATUS_LOG_LEVEL":                    "warn",
	}
}

// world is the serves of one configuration, their clients and the record.
type world struct {
	t       *testing.T
	bin     string
	env     map[string]string
	serves  []*testenv.Service
	hc      *http.Client
	tenants []string
	keys    map[string]string // tenant -> API key (read, write, admin)
	rec     *recorder
	clients atomic.Int64
}

// newWorld starts n serves with env (each may get its own overrides in
// perServe) and makes an API key for two tenants.
func newWorld(t *testing.T, n int, env map[string]string, perServe func(i int, env map[string]string)) *world {
	t.Helper()
	w := &world{t: t, bin: testenv.ServiceBinary(t, testenv.RaceEnabled), env: env, rec: &recorder{},
		keys: map[string]string{}, tenants: []string{"acme", "globex"},
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	setup := map[string]string{}
	for k, v := range env {
		setup[k] = v
	}
	setup["ASYNCSTATUS_REDIS_OP_TIMEOUT"] = "10s" // set-up is not under test
	for _, tenant := range w.tenants {
		out := strings.TrimSpace(testenv.ServiceCommand(t, w.bin, setup, "keys", "create", "--tenant", tenant,
			"--scopes", "read,write,admin", "--name", "histories"))
		if !strings.HasPrefix(out, "ask_") {
			t.Fatalf("keys create printed %q", out)
		}
		w.keys[tenant] = out
	}
	for i := range n {
		e := map[string]string{}
		for k, v := range env {
			e[k] = v
		}
		if perServe != nil {
			perServe(i, e)
		}
		w.serves = append(w.serves, testenv.StartService(t, w.bin, e))
	}
	return w
}

// recorder keeps the history.
type recorder struct {
	mu      sync.Mutex
	ops     []Op
	waiters []Waiter
	faults  []Window
	walks   []walk
	lost    int // creates whose outcome is unknown and whose id nobody learned
}

type walk struct {
	tenant     string
	start, end time.Time
	ids        []string
	complete   bool
}

func (r *recorder) add(op Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

func (r *recorder) waiter(w Waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiters = append(r.waiters, w)
}

func (r *recorder) fault(f Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
}

func (r *recorder) snapshot() ([]Op, []Waiter, []Window, []walk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...), append([]Waiter(nil), r.waiters...),
		append([]Window(nil), r.faults...), append([]walk(nil), r.walks...)
}

// rep is the part of a representation the model reads.
type rep struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Version   int    `json:"version"`
	PollToken string `json:"poll_token"`
}

type problem struct {
	Code    string `json:"code"`
	Request *rep   `json:"request"`
}

// call is one HTTP exchange.
type call struct {
	serve   int
	method  string
	path    string
	key     string // API key
	token   string // poll token instead
	idem    string
	body    string
	headers map[string]string
	timeout time.Duration
}

// result is an answer turned into what the model reads.
type result struct {
	outcome Outcome
	rep     rep
	code    int
	problem string
	skip    bool // an answer that says nothing about the state (429 POLLED_TOO_EARLY)
}

func (w *world) do(c call) (result, time.Time, time.Time) {
	timeout := c.timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, c.method, w.serves[c.serve].URL()+c.path, strings.NewReader(c.body))
	if err != nil {
		w.t.Errorf("building %s %s: %v", c.method, c.path, err)
		return result{outcome: Unknown}, time.Now(), time.Now()
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if c.token != "" {
		req.Header.Set("X-Poll-Token", c.token)
	}
	if c.idem != "" {
		req.Header.Set("Idempotency-Key", c.idem)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	res, err := w.hc.Do(req)
	if err != nil {
		return result{outcome: Unknown}, start, time.Now()
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	end := time.Now()
	if err != nil {
		return result{outcome: Unknown, code: res.StatusCode}, start, end
	}
	r := result{code: res.StatusCode}
	switch {
	case res.StatusCode == 200 || res.StatusCode == 202:
		if err := json.Unmarshal(b, &r.rep); err != nil || r.rep.Version == 0 {
			w.t.Errorf("%s %s: %d with a body that is no representation: %q", c.method, c.path, res.StatusCode, b)
			r.skip = true
		}
		r.outcome = OK
	case res.StatusCode == 204:
		r.outcome = OK
	case res.StatusCode == 304:
		r.outcome = NotModified
	case res.StatusCode == 404:
		r.outcome = NotFound
	case res.StatusCode == 409:
		var p problem
		if err := json.Unmarshal(b, &p); err != nil || p.Request == nil {
			w.t.Errorf("%s %s: 409 without the request: %q", c.method, c.path, b)
			r.skip = true
		} else {
			r.rep, r.outcome, r.problem = *p.Request, Terminal, p.Code
		}
	case res.StatusCode == 503:
		r.outcome = Unknown
	case res.StatusCode == 429:
		var p problem
		_ = json.Unmarshal(b, &p)
		r.problem, r.skip = p.Code, true
		if p.Code != "POLLED_TOO_EARLY" {
			w.t.Errorf("%s %s: 429 %s with rate limits off", c.method, c.path, p.Code)
		}
	default:
		w.t.Errorf("%s %s via serve %d: unexpected %d %s", c.method, c.path, c.serve, res.StatusCode, b)
		r.skip = true
	}
	return r, start, end
}

// record turns an exchange into an Op of the history.
func (w *world) record(client int, kind Kind, id string, c call, r result, start, end time.Time) Op {
	op := Op{Client: client, Serve: c.serve, Kind: kind, ID: id, Call: start, Return: end, Outcome: r.outcome,
		Status: r.rep.Status, Version: r.rep.Version, Keyed: c.idem != ""}
	if !r.skip {
		w.rec.add(op)
	}
	return op
}

func (w *world) serve() int { return mathrand.IntN(len(w.serves)) }

func (w *world) client() int { return int(w.clients.Add(1)) - 1 }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// run drives the workload for d with n workers and a list walker per tenant;
// the nemesis (may be nil) runs beside it and must return by the deadline.
func (w *world) run(d time.Duration, n int, nemesis func(ctx context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				w.scenario(ctx)
			}
		})
	}
	for _, tenant := range w.tenants {
		wg.Go(func() {
			for ctx.Err() == nil {
				w.rec.mu.Lock()
				w.rec.walks = append(w.rec.walks, w.listWalk(tenant, w.serve()))
				w.rec.mu.Unlock()
				time.Sleep(500 * time.Millisecond)
			}
		})
	}
	if nemesis != nil {
		wg.Go(func() { nemesis(ctx) })
	}
	wg.Wait()
}

// scenario takes one request from create through racing terminal transitions,
// with waiters, polls and sometimes a delete.
func (w *world) scenario(ctx context.Context) {
	tenant := w.tenants[mathrand.IntN(len(w.tenants))]
	key := w.keys[tenant]
	body := fmt.Sprintf(`{"type":"hist.job","context":{"n":"%s"}}`, randomHex(4))
	var created rep
	if mathrand.IntN(2) == 0 {
		// Keyed: 1-3 racing creates with one key and body, on different serves,
		// then retries (safe: §11) until one answer names the request.
		idem := "hist-" + randomHex(8)
		for attempt := 0; attempt < 4 && created.ID == ""; attempt++ {
			racers := 1
			if attempt == 0 {
				racers = 1 + mathrand.IntN(3)
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range racers {
				wg.Go(func() {
					c := call{serve: w.serve(), method: "POST", path: "/v1/requests", key: key, idem: idem, body: body}
					r, s, e := w.do(c)
					if r.outcome == OK {
						w.record(w.client(), Create, r.rep.ID, c, r, s, e)
						mu.Lock()
						created = r.rep
						mu.Unlock()
					} else if !r.skip {
						w.unknownCreate(c, r, s, e)
					}
				})
			}
			wg.Wait()
			if created.ID == "" {
				time.Sleep(100 * time.Millisecond)
			}
		}
	} else {
		c := call{serve: w.serve(), method: "POST", path: "/v1/requests", key: key, body: body}
		r, s, e := w.do(c)
		if r.outcome == OK {
			w.record(w.client(), Create, r.rep.ID, c, r, s, e)
			created = r.rep
		} else if !r.skip {
			w.unknownCreate(c, r, s, e)
		}
	}
	if created.ID == "" {
		return
	}
	id, path := created.ID, "/v1/requests/"+created.ID
	me := w.client()

	// Waiters: a long-poll loop and a stream, each on some serve.
	stop := make(chan struct{})
	var waiters sync.WaitGroup
	if mathrand.IntN(4) != 0 {
		waiters.Go(func() { w.longPolls(id, path, key, created.Version, stop) })
	}
	if mathrand.IntN(3) != 0 {
		waiters.Go(func() { w.stream(id, path, created.PollToken, key, stop) })
	}
	pause := func() { time.Sleep(time.Duration(20+mathrand.IntN(120)) * time.Millisecond) }
	pause()

	transition := func(client int, kind Kind, body string) {
		c := call{serve: w.serve(), method: "POST", path: path + "/" + string(kind), key: key, body: body}
		r, s, e := w.do(c)
		w.record(client, kind, id, c, r, s, e)
	}
	poll := func() {
		c := call{serve: w.serve(), method: "GET", path: path, key: key}
		if mathrand.IntN(2) == 0 {
			c.key, c.token = "", created.PollToken
		}
		r, s, e := w.do(c)
		w.record(me, Poll, id, c, r, s, e)
	}
	// processing and heartbeats, with polls between
	for i := range mathrand.IntN(4) {
		transition(me, Processing, fmt.Sprintf(`{"percent":%d,"message":"step %d"}`, 10*(i+1), i))
		pause()
		if mathrand.IntN(2) == 0 {
			poll()
		}
	}
	// racing terminal transitions on different serves: exactly one may win
	var race sync.WaitGroup
	kinds := []Kind{Complete, Fail, Cancel}
	for range 2 + mathrand.IntN(2) {
		kind := kinds[mathrand.IntN(len(kinds))]
		b := map[Kind]string{
			Complete: `{"result_type":"answer","result":{"ok":true}}`,
			Fail:     `{"code":"ERR_HIST","reason":"history test"}`,
			Cancel:   `{"reason":"history test"}`,
		}[kind]
		client := w.client()
		race.Go(func() { transition(client, kind, b) })
	}
	race.Wait()
	pause()
	poll()
	if mathrand.IntN(3) == 0 {
		transition(me, Processing, `{}`) // out of a terminal: 409 with the state
	}
	if mathrand.IntN(4) == 0 {
		c := call{serve: w.serve(), method: "DELETE", path: path, key: key}
		r, s, e := w.do(c)
		w.record(me, Delete, id, c, r, s, e)
		pause()
		w.read(me, id, key)
	}
	// Waiters end on the terminal state (or the delete); give them their
	// bound past it, then cut them.
	ended := make(chan struct{})
	go func() { waiters.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(wakeBound + time.Second):
	}
	close(stop)
	<-ended
}

// unknownCreate notes a create that may have made a request nobody knows:
// nothing later names it, so the model cannot use it; the list check allows it.
func (w *world) unknownCreate(c call, r result, s, e time.Time) {
	w.rec.mu.Lock()
	defer w.rec.mu.Unlock()
	w.rec.lost++
}

// read is an immediate read that is never paced: a long poll whose
// If-None-Match ("0") cannot match answers at once (§12).
func (w *world) read(client int, id, key string) Op {
	c := call{serve: w.serve(), method: "GET", path: "/v1/requests/" + id, key: key,
		headers: map[string]string{"Prefer": "wait=1", "If-None-Match": `"0"`}}
	r, s, e := w.do(c)
	return w.record(client, Poll, id, c, r, s, e)
}

// longPolls holds long polls on the request until it is terminal or gone, or
// stop, each with the version last seen as If-None-Match.
func (w *world) longPolls(id, path, key string, version int, stop <-chan struct{}) {
	client := w.client()
	for {
		select {
		case <-stop:
			return
		default:
		}
		c := call{serve: w.serve(), method: "GET", path: path, key: key, timeout: 10 * time.Second,
			headers: map[string]string{"Prefer": "wait=5", "If-None-Match": fmt.Sprintf(`"%d"`, version)}}
		r, s, e := w.do(c)
		if r.skip {
			return
		}
		op := Op{Client: client, Serve: c.serve, Kind: LongPoll, ID: id, Call: s, Return: e, Outcome: r.outcome,
			Status: r.rep.Status, Version: r.rep.Version, ETag: version}
		w.rec.add(op)
		wt := Waiter{Kind: LongPoll, ID: id, Serve: c.serve, Open: s, Close: e, ETag: version,
			Ended: r.outcome != Unknown, Broken: r.outcome == Unknown}
		if r.outcome == OK {
			wt.Seen = []Seen{{At: e, Version: r.rep.Version}}
			version = r.rep.Version
		}
		w.rec.waiter(wt)
		switch {
		case r.outcome == NotFound, r.outcome == OK && IsTerminal(r.rep.Status):
			return
		case r.outcome == Unknown:
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// stream follows the request's event stream (by poll token or key) until the
// server ends it or stop; every event is a read of the state.
func (w *world) stream(id, path, token, key string, stop <-chan struct{}) {
	client := w.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serve := w.serve()
	target := w.serves[serve].URL() + path + "/stream"
	if mathrand.IntN(2) == 0 {
		target += "?poll_token=" + url.QueryEscape(token)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", target, nil)
	if !strings.Contains(target, "poll_token") {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Accept", "text/event-stream")
	open := time.Now()
	wt := Waiter{Kind: Event, ID: id, Serve: serve, Open: open, ETag: -1}
	cut := atomic.Bool{}
	go func() {
		select {
		case <-stop:
			cut.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	finish := func() {
		wt.Close = time.Now()
		if wt.ETag < 0 {
			wt.ETag = 0
		}
		w.rec.waiter(wt)
	}
	res, err := w.hc.Do(req)
	if err != nil {
		wt.Broken = !cut.Load()
		finish()
		return
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		if res.StatusCode != 503 && res.StatusCode != 404 {
			b, _ := io.ReadAll(res.Body)
			w.t.Errorf("stream of %s: %d %s", id, res.StatusCode, b)
		}
		wt.Broken = true
		finish()
		return
	}
	stream := int(w.clients.Add(1))
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		at := time.Now()
		var r rep
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			w.t.Errorf("stream of %s: event data is not a representation: %q", id, data)
			continue
		}
		w.rec.add(Op{Client: client, Serve: serve, Kind: Event, ID: id, Call: open, Return: at, Outcome: OK,
			Status: r.Status, Version: r.Version, Stream: stream})
		if wt.ETag < 0 {
			wt.ETag = r.Version
		}
		wt.Seen = append(wt.Seen, Seen{At: at, Version: r.Version})
	}
	wt.Ended = sc.Err() == nil
	wt.Broken = sc.Err() != nil && !cut.Load() && !errors.Is(sc.Err(), context.Canceled)
	finish()
}

// listWalk walks every page of the tenant's requests; complete is false when
// a page failed.
func (w *world) listWalk(tenant string, serve int) walk {
	wk := walk{tenant: tenant, start: time.Now()}
	cursor := ""
	for page := 0; page < 1000; page++ {
		path := "/v1/requests?limit=100"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", w.serves[serve].URL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+w.keys[tenant])
		res, err := w.hc.Do(req)
		if err != nil {
			cancel()
			wk.end = time.Now()
			return wk
		}
		var body struct {
			Items      []rep   `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		if err != nil { // cut (a serve killed, a timeout): an incomplete walk
			wk.end = time.Now()
			return wk
		}
		if res.StatusCode != 200 {
			if res.StatusCode != 503 {
				w.t.Errorf("list of %s: %d %s", tenant, res.StatusCode, b)
			}
			wk.end = time.Now()
			return wk
		}
		if err := json.Unmarshal(b, &body); err != nil {
			w.t.Errorf("list of %s: %v: %q", tenant, err, b)
			wk.end = time.Now()
			return wk
		}
		for _, it := range body.Items {
			wk.ids = append(wk.ids, it.ID)
		}
		if body.NextCursor == nil || *body.NextCursor == "" {
			wk.complete = true
			break
		}
		cursor = *body.NextCursor
	}
	wk.end = time.Now()
	return wk
}

// verdict is what the checks found in one configuration.
type verdict struct {
	ops, requests, waiters, walks int
	unknown                       int // operations with an unknown outcome
	lostCreates                   int
	lin                           Linearizability
	anomalies                     []Anomaly
	wake                          WakeupReport
	faults                        map[string]int
	visual                        string
	illegal                       map[string][]Op // the histories of (up to 5) non-linearizable ids
	windows                       []Window
}

func (v verdict) byKind() map[string]int {
	m := map[string]int{}
	for _, a := range v.anomalies {
		m[a.Kind]++
	}
	return m
}

// quiesce ends the run: every serve is back, and a final read of every
// request and a final list walk per tenant are recorded.
func (w *world) quiesce() {
	w.t.Helper()
	for i, s := range w.serves {
		if gone, err := s.Exited(); gone {
			w.t.Fatalf("serve %d exited: %v", i, err)
		}
	}
	ops, _, _, _ := w.rec.snapshot()
	ids := byID(ops)
	// Ask with each tenant's key until one does not answer 404 (the last
	// answer is recorded: another tenant's 404 is the same as the owner's when
	// the request is gone).
	for id := range ids {
		for _, tenant := range w.tenants {
			c := call{serve: w.serve(), method: "GET", path: "/v1/requests/" + id, key: w.keys[tenant],
				headers: map[string]string{"Prefer": "wait=1", "If-None-Match": `"0"`}}
			r, s, e := w.do(c)
			if r.outcome == NotFound && tenant != w.tenants[len(w.tenants)-1] {
				continue
			}
			w.record(w.client(), Poll, id, c, r, s, e)
			break
		}
	}
}

// check runs every check on the record and returns the verdict; name names
// the visualisation file written when the history is not linearizable.
func (w *world) check(name string) verdict {
	w.t.Helper()
	ops, waiters, faults, walks := w.rec.snapshot()
	v := verdict{ops: len(ops), requests: len(byID(ops)), waiters: len(waiters), faults: map[string]int{}}
	for _, op := range ops {
		if op.Outcome == Unknown {
			v.unknown++
		}
	}
	w.rec.mu.Lock()
	v.lostCreates = w.rec.lost
	w.rec.mu.Unlock()
	for _, f := range faults {
		v.faults[f.What]++
	}
	v.windows = faults
	dir := os.Getenv("ASYNCSTATUS_HISTORIES_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	v.visual = filepath.Join(dir, fmt.Sprintf("asyncstatus-history-%s-%d.html", name, time.Now().Unix()))
	lin, err := CheckLinearizable(ops, 20*time.Second, v.visual)
	if err != nil {
		w.t.Errorf("%v", err)
	}
	v.lin = lin
	if len(lin.Illegal) == 0 {
		v.visual = ""
	}
	v.illegal = map[string][]Op{}
	all := byID(ops)
	for _, id := range lin.Illegal[:min(5, len(lin.Illegal))] {
		v.illegal[id] = all[id]
	}
	v.anomalies = Explain(ops)
	for _, id := range lin.Illegal {
		v.anomalies = append(v.anomalies, Anomaly{AnomalyNotLinearizable, id, "no linearization (see the visualisation)"})
	}
	v.wake = CheckWakeups(ops, waiters, faults, wakeBound)
	v.anomalies = append(v.anomalies, v.wake.Late...)
	// Walks during the load: no duplicate, and no survivor skipped (an id
	// acknowledged before the walk began and not sent a delete before it ended).
	ackedAt, deleteAt := map[string]time.Time{}, map[string]time.Time{}
	tenantOf := map[string]string{}
	for _, op := range ops {
		if op.Kind == Create && op.Outcome == OK {
			if t, ok := ackedAt[op.ID]; !ok || op.Return.Before(t) {
				ackedAt[op.ID] = op.Return
			}
		}
		if op.Kind == Delete {
			if t, ok := deleteAt[op.ID]; !ok || op.Call.Before(t) {
				deleteAt[op.ID] = op.Call
			}
		}
	}
	for _, wk := range walks {
		seen := map[string]bool{}
		for _, id := range wk.ids {
			if seen[id] {
				v.anomalies = append(v.anomalies, Anomaly{AnomalyListDuplicate, id, "twice in one walk of " + wk.tenant})
			}
			seen[id] = true
			tenantOf[id] = wk.tenant
		}
	}
	for _, wk := range walks {
		if !wk.complete {
			continue
		}
		v.walks++
		seen := map[string]bool{}
		for _, id := range wk.ids {
			seen[id] = true
		}
		for id, at := range ackedAt {
			if tenantOf[id] != wk.tenant || seen[id] || !at.Before(wk.start) {
				continue
			}
			if d, ok := deleteAt[id]; ok && d.Before(wk.end) {
				continue
			}
			v.anomalies = append(v.anomalies, Anomaly{AnomalyListMissing, id, fmt.Sprintf("acknowledged at %s, not in the walk of %s..%s",
				at.Format("15:04:05.000"), wk.start.Format("15:04:05.000"), wk.end.Format("15:04:05.000"))})
		}
	}
	// Final walks, after quiescence.
	var listed []string
	for _, tenant := range w.tenants {
		var wk walk
		for range 5 {
			if wk = w.listWalk(tenant, w.serve()); wk.complete {
				break
			}
			time.Sleep(time.Second)
		}
		if !wk.complete {
			w.t.Errorf("no complete list walk of %s after quiescence", tenant)
		}
		listed = append(listed, wk.ids...)
	}
	v.anomalies = append(v.anomalies, CheckListing(ops, listed)...)
	return v
}

// log reports the verdict in the test log.
func (v verdict) log(t *testing.T, name string, wall time.Duration) {
	t.Helper()
	kinds := v.byKind()
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(ks)
	var fs []string
	for k, n := range v.faults {
		fs = append(fs, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(fs)
	var p50, p99 time.Duration
	if d := v.wake.Delays; len(d) > 0 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		p50, p99 = d[len(d)/2], d[min(len(d)-1, len(d)*99/100)]
	}
	t.Logf("history %s: %d operations on %d requests (%d unknown outcomes, %d creates with unknown outcome and no id), "+
		"%d waiters, %d complete list walks; faults %s; linearizable: %d requests, %d not, %d undecided; "+
		"wake-ups: %d checked (p50 %s, p99 %s, max %s), %d late, %d deadlines moved by a fault; anomalies %s; wall %s",
		name, v.ops, v.requests, v.unknown, v.lostCreates, v.waiters, v.walks, strings.Join(fs, " "),
		v.lin.Requests, len(v.lin.Illegal), len(v.lin.TimedOut),
		v.wake.Checked, p50.Round(time.Millisecond), p99.Round(time.Millisecond), v.wake.MaxDelay.Round(time.Millisecond),
		len(v.wake.Late), v.wake.Excused, strings.Join(ks, " "), wall.Round(time.Second))
	if v.visual != "" {
		t.Logf("history %s: porcupine visualisation of the non-linearizable requests: %s", name, v.visual)
	}
	for i, a := range v.anomalies {
		if i == 20 {
			t.Logf("... and %d more", len(v.anomalies)-20)
			break
		}
		t.Logf("anomaly: %s", a)
	}
	for id, l := range v.illegal {
		var b strings.Builder
		for _, op := range l {
			b.WriteString("\n\t" + op.String())
		}
		t.Logf("history of %s, not linearizable:%s", id, b.String())
	}
	if len(v.anomalies) > 0 {
		for _, f := range v.windows {
			t.Logf("fault %s on serve %d: %s .. %s", f.What, f.Serve, f.From.Format("15:04:05.000"), f.To.Format("15:04:05.000"))
		}
	}
	if len(v.lin.TimedOut) > 0 {
		t.Errorf("the checker could not decide %d requests in time", len(v.lin.TimedOut))
	}
}
