package load

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// scenario is one measured workload, run on a (asyncstatus) and b (the
// baseline) in turn.
type scenario struct {
	name   string
	a, b   *server
	target target
	// work builds a round's workload for s; before (optional) runs before each round.
	work   func(s *server) workload
	before func(ctx context.Context, s *server) error
	// probe (optional) is one call that tells whether s has the route at all.
	probe func(s *server) (status int, body []byte, err error)
	note  string
}

// target is the bar for asyncstatus against the baseline; 0 = none:
// answers/s at least minRate times the baseline's, p99 at most maxP99 times,
// CPU per answer (server + Redis) at most maxCPU times.
type target struct {
	minRate, maxP99, maxCPU float64
}

const (
	scenarioPoll      = "poll (Bearer)"
	scenarioPollToken = "poll (X-Poll-Token)"
	scenarioPollRL    = "poll (Bearer, rate limit on)"
	scenarioCreate    = "create (Idempotency-Key)"
	scenarioComplete  = "complete"
	scenarioPollDone  = "poll (terminal, Bearer)"
	scenarioList      = "list (limit=50)"
)

func (h *harness) scenarios() []scenario {
	list := []scenario{
		{name: scenarioPoll, a: h.as, b: h.bl, target: target{minRate: 0.90, maxP99: 1.2}, work: h.pollWork(false)},
		{name: scenarioPollToken, a: h.as, b: h.bl, work: h.pollWork(true),
			note: "the baseline answers its plain poll"},
	}
	if h.asRL != nil {
		list = append(list, scenario{name: scenarioPollRL, a: h.asRL, b: h.bl, work: h.pollWork(false)})
	}
	list = append(list,
		scenario{name: scenarioCreate, a: h.as, b: h.bl, target: target{minRate: 1.2, maxCPU: 1.0}, work: h.createWork},
		scenario{name: scenarioComplete, a: h.as, b: h.bl, target: target{minRate: 0.90, maxCPU: 1.3}, work: h.completeWork,
			before: h.topUpPool},
		// After complete: it polls the requests complete finished.
		scenario{name: scenarioPollDone, a: h.as, b: h.bl, target: target{minRate: 1.2, maxCPU: 0.85}, work: h.pollDoneWork,
			before: h.needDone},
		scenario{name: scenarioList, a: h.as, b: h.bl, work: h.listWork, probe: func(s *server) (int, []byte, error) {
			cl := newHTTPClient(s.addr, 1)
			defer cl.close()
			return cl.do("GET", "/v1/requests?limit=50", nil, s.auth(tenantPoll, s.data.readKeys[0])...)
		}},
	)
	return append(list, h.moreScenarios()...)
}

func judgePoll(status int, body []byte) verdict {
	switch {
	case status == 200 && bytes.Contains(body, []byte(`"status":"`)):
		return good
	case status == 429 && bytes.Contains(body, []byte("POLLED_TOO_EARLY")):
		return paced
	}
	return wrong
}

// pollWork polls the preloaded requests: call c reads request c mod N as caller
// c div N, so every (caller, request) pair is new until the walk wraps, and no
// answer is a 429 POLLED_TOO_EARLY. With tokens, the caller is the request's
// poll token (one per request): a request comes back once every N calls.
func (h *harness) pollWork(tokens bool) func(s *server) workload {
	return func(s *server) workload {
		d := s.data
		n := uint64(len(d.ids))
		base := "http://" + s.addr + "/v1/requests/"
		auths := make([][]header, len(d.readKeys))
		for i, k := range d.readKeys {
			auths[i] = s.auth(tenantPoll, k)
		}
		return workload{
			next: func(req *fasthttp.Request) bool {
				req.Header.SetMethod("GET")
				if tokens && !s.baseline {
					c := d.tokenSeq.Add(1) - 1
					req.SetRequestURI(base + d.ids[c%n])
					req.Header.Set("X-Poll-Token", d.tokens[c%n])
					return true
				}
				c := d.pollSeq.Add(1) - 1
				req.SetRequestURI(base + d.ids[c%n])
				for _, hd := range auths[(c/n)%uint64(len(auths))] {
					req.Header.Set(hd.name, hd.value)
				}
				return true
			},
			judge: judgePoll,
		}
	}
}

func (h *harness) createCall(s *server, req *fasthttp.Request) {
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://" + s.addr + "/v1/requests")
	for _, hd := range s.auth(tenantWrite, s.data.writeKey) {
		req.Header.Set(hd.name, hd.value)
	}
	req.Header.Set("Idempotency-Key", "bench-"+strconv.FormatUint(s.data.ikSeq.Add(1), 10))
	req.Header.SetContentType("application/json")
	req.SetBody(h.ref.Create)
}

// createdID finds the id in a create answer without decoding all of it.
func createdID(body []byte) string {
	i := bytes.Index(body, []byte(`"id":"`))
	if i < 0 || len(body) < i+6+36 {
		return ""
	}
	return string(body[i+6 : i+6+36])
}

// createWork creates reference requests, each with its own Idempotency-Key; the
// created ids feed the complete scenario.
func (h *harness) createWork(s *server) workload {
	d := s.data
	return workload{
		next: func(req *fasthttp.Request) bool { h.createCall(s, req); return true },
		judge: func(status int, body []byte) verdict {
			if status == 202 && createdID(body) != "" {
				return good
			}
			return wrong
		},
		keep: func(_ int, body []byte) {
			id := createdID(body)
			d.poolMu.Lock()
			d.pool = append(d.pool, id)
			d.poolMu.Unlock()
		},
	}
}

// pollDoneWork polls the requests the complete scenario finished, with the
// write key (scopes read,write) of their tenant, round and round: a terminal
// request is not paced, so no answer is a 429.
func (h *harness) pollDoneWork(s *server) workload {
	ids := s.data.done()
	base := "http://" + s.addr + "/v1/requests/"
	hdrs := s.auth(tenantWrite, s.data.writeKey)
	var seq atomic.Uint64
	return workload{
		next: func(req *fasthttp.Request) bool {
			c := seq.Add(1) - 1
			req.Header.SetMethod("GET")
			req.SetRequestURI(base + ids[c%uint64(len(ids))])
			for _, hd := range hdrs {
				req.Header.Set(hd.name, hd.value)
			}
			return true
		},
		judge: func(status int, body []byte) verdict {
			if status == 200 && bytes.Contains(body, []byte(`"succeeded"`)) {
				return good
			}
			return wrong
		},
	}
}

// needDone refuses to poll terminal requests when complete made none (it did
// not run: -only).
func (h *harness) needDone(_ context.Context, s *server) error {
	if len(s.data.done()) == 0 {
		return fmt.Errorf("%s has no completed request to poll: run the complete scenario too", s.name)
	}
	return nil
}

// done is the requests complete finished.
func (d *dataset) done() []string {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	return d.finished
}

// completeWork completes queued requests of the pool, each once.
func (h *harness) completeWork(s *server) workload {
	d := s.data
	d.poolMu.Lock()
	pool := d.pool
	d.poolMu.Unlock()
	base := "http://" + s.addr + "/v1/requests/"
	hdrs := s.auth(tenantWrite, d.writeKey)
	return workload{
		next: func(req *fasthttp.Request) bool {
			i := d.poolNext.Add(1) - 1
			if i >= int64(len(pool)) {
				return false
			}
			req.Header.SetMethod("POST")
			req.SetRequestURI(base + pool[i] + "/complete")
			for _, hd := range hdrs {
				req.Header.Set(hd.name, hd.value)
			}
			req.Header.SetContentType("application/json")
			req.SetBody(h.ref.Complete)
			return true
		},
		judge: func(status int, body []byte) verdict {
			if status == 200 && bytes.Contains(body, []byte(`"succeeded"`)) {
				if id := createdID(body); id != "" {
					d.poolMu.Lock()
					d.finished = append(d.finished, id)
					d.poolMu.Unlock()
				}
				return good
			}
			return wrong
		},
	}
}

// topUpPool makes sure enough queued requests wait for the next complete round:
// twice what the server last managed (or twice its create rate) over a round, as
// a round on a quiet machine can run far faster than one on a busy one.
func (h *harness) topUpPool(ctx context.Context, s *server) error {
	return h.topUpPoolOf(scenarioComplete)(ctx, s)
}

// topUpPoolOf is topUpPool for the complete scenario named name: s's last
// rate in it, else the fastest other server's in it, else asyncstatus's in
// the complete scenario, else twice its create rate.
func (h *harness) topUpPoolOf(name string) func(ctx context.Context, s *server) error {
	return func(ctx context.Context, s *server) error {
		rate := s.lastRate[name]
		if rate == 0 {
			for _, o := range h.all {
				rate = max(rate, o.lastRate[name])
			}
		}
		if rate == 0 {
			rate = h.as.lastRate[scenarioComplete]
		}
		if rate == 0 {
			rate = 2 * h.as.lastRate[scenarioCreate] // a complete costs about what a create does
		}
		if rate == 0 {
			rate = 5000
		}
		return h.topUp(ctx, s, rate)
	}
}

func (h *harness) topUp(ctx context.Context, s *server, rate float64) error {
	d := s.data
	need := int(2*rate*(h.cfg.Duration+h.cfg.Warmup).Seconds()) + 200
	d.poolMu.Lock()
	left := len(d.pool) - int(d.poolNext.Load())
	d.poolMu.Unlock()
	if left >= need {
		return nil
	}
	more := need - left
	t0 := time.Now()
	cl := newHTTPClient(s.addr, h.cfg.Concurrency)
	defer cl.close()
	err := parallel(ctx, more, h.cfg.Concurrency, func(int) error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		h.createCall(s, req)
		if err := cl.hc.Do(req, resp); err != nil {
			return err
		}
		id := createdID(resp.Body())
		if resp.StatusCode() != 202 || id == "" {
			return fmt.Errorf("create answered %d: %s", resp.StatusCode(), truncate(string(resp.Body()), 300))
		}
		d.poolMu.Lock()
		d.pool = append(d.pool, id)
		d.poolMu.Unlock()
		return nil
	})
	h.logf("  %s: created %d more queued requests to complete (%s)", s.name, more, time.Since(t0).Round(100*time.Millisecond))
	return err
}

func (h *harness) listWork(s *server) workload {
	url := "http://" + s.addr + "/v1/requests?limit=50"
	hdrs := s.auth(tenantPoll, s.data.readKeys[0])
	return workload{
		next: func(req *fasthttp.Request) bool {
			req.Header.SetMethod("GET")
			req.SetRequestURI(url)
			for _, hd := range hdrs {
				req.Header.Set(hd.name, hd.value)
			}
			return true
		},
		judge: func(status int, body []byte) verdict {
			if status == 200 && bytes.Contains(body, []byte(`"items"`)) {
				return good
			}
			return wrong
		},
	}
}

// runScenario runs the rounds A B A B ... and adds the scenario's rows to the report.
func (h *harness) runScenario(ctx context.Context, sc scenario) error {
	rowA := &Row{Scenario: sc.name, Server: sc.a.name, Target: sc.target, Note: sc.note}
	rowB := &Row{Scenario: sc.name, Server: sc.b.name, Baseline: true}
	defer func() { h.report.Rows = append(h.report.Rows, rowA, rowB) }()
	if sc.probe != nil {
		for _, x := range []struct {
			s   *server
			row *Row
		}{{sc.a, rowA}, {sc.b, rowB}} {
			h.only(x.s)
			st, body, err := sc.probe(x.s)
			if err != nil {
				return err
			}
			if st == 404 || st == 405 {
				x.row.Skipped = fmt.Sprintf("no such route (answered %d)", st)
				h.logf("%s: %s has no such route (%d %s); scenario skipped", sc.name, x.s.name, st, truncate(string(body), 120))
			}
		}
		if rowA.Skipped != "" || rowB.Skipped != "" {
			if rowB.Skipped == "" {
				rowB.Skipped = "not run: asyncstatus has no such route"
			}
			return nil
		}
	}
	for r := 1; r <= h.cfg.Rounds; r++ {
		for _, x := range []struct {
			s   *server
			row *Row
		}{{sc.a, rowA}, {sc.b, rowB}} {
			h.only(x.s)
			if sc.before != nil {
				if err := sc.before(ctx, x.s); err != nil {
					return err
				}
			}
			h.waitQuiet(ctx)
			w := sc.work(x.s)
			sawRL := false
			w.sniff = func(hd *fasthttp.ResponseHeader) { sawRL = len(hd.Peek("RateLimit-Limit")) > 0 }
			res, err := runRound(ctx, x.s.addr, h.cfg.Concurrency, h.cfg.Warmup, h.cfg.Duration, w,
				meters{serverPID: x.s.p.pid(), redis: h.redis})
			if err != nil {
				return fmt.Errorf("%s round %d: %w", x.s.name, r, err)
			}
			if x.s.p.exited() {
				return fmt.Errorf("%s exited during the round (%v):\n%s", x.s.name, x.s.p.waitErr, x.s.p.logTail(20))
			}
			x.row.add(res)
			x.row.RateLimitHeaders = x.row.RateLimitHeaders || sawRL
			rate := float64(res.Good) / res.Elapsed.Seconds()
			x.s.lastRate[sc.name] = rate
			h.logf("%-30s round %d/%d %-28s %8.0f answers/s  p50 %6.2f ms  p99 %6.2f ms  cpu %.3f ms/answer%s",
				sc.name, r, h.cfg.Rounds, x.s.name, rate, ms(res.p(0.50)), ms(res.p(0.99)),
				1000*(res.CPUServer+res.CPURedis)/float64(max(res.Good, 1)), res.flags())
		}
	}
	if sc.name == scenarioPoll && h.cfg.Profile {
		h.profile(ctx, sc)
	}
	h.resumeAll()
	return nil
}

func (r roundResult) p(q float64) time.Duration {
	return percentile(sortedCopy(r.Latencies), q)
}

func (r roundResult) flags() string {
	var f []string
	if r.Paced > 0 {
		f = append(f, fmt.Sprintf("%d paced (429)", r.Paced))
	}
	if r.Wrong > 0 {
		f = append(f, fmt.Sprintf("%d wrong: %s", r.Wrong, r.WrongSample))
	}
	if r.Errors > 0 {
		f = append(f, fmt.Sprintf("%d transport errors: %s", r.Errors, r.WrongSample))
	}
	if r.Exhausted {
		f = append(f, "pool ran out: window shortened")
	}
	if len(f) == 0 {
		return ""
	}
	return "  [" + strings.Join(f, "; ") + "]"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// aofSuffix names the scenarios of the pass with Redis persisting (runAOF).
const aofSuffix = " [appendonly everysec]"

// runAOF turns on Redis's append-only file as production runs it
// (appendonly yes, appendfsync everysec: every write is appended, the file
// fsynced once a second by a background thread) and runs the poll, create and
// complete scenarios again, on the same data, under names with aofSuffix.
func (h *harness) runAOF(ctx context.Context) error {
	var run []scenario
	for _, sc := range h.scenarios() {
		if (sc.name == scenarioPoll || sc.name == scenarioCreate || sc.name == scenarioComplete) && h.wanted(sc.name) {
			run = append(run, sc)
		}
	}
	if len(run) == 0 {
		return nil
	}
	rdb := h.redis.rdb
	h.resumeAll() // the servers keep their connections while Redis rewrites
	if err := rdb.ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
		return fmt.Errorf("appendonly pass: %w", err)
	}
	if err := rdb.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
		return fmt.Errorf("appendonly pass: %w", err)
	}
	// CONFIG SET appendonly yes starts a rewrite of the whole data set; the
	// file is in use (aof_enabled:1) once it is done.
	t0 := time.Now()
	for {
		info, err := rdb.Info(ctx, "persistence").Result()
		if err != nil {
			return fmt.Errorf("appendonly pass: %w", err)
		}
		if strings.Contains(info, "aof_enabled:1") && strings.Contains(info, "aof_rewrite_in_progress:0") &&
			!strings.Contains(info, "aof_rewrite_scheduled:1") {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			return fmt.Errorf("appendonly pass: the first rewrite did not end in 5 minutes:\n%s", info)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	h.logf("appendonly on (appendfsync everysec) after %s; poll, create and complete again", time.Since(t0).Round(time.Millisecond))
	for _, sc := range run {
		sc.name += aofSuffix
		if err := h.runScenario(ctx, sc); err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
	}
	return nil
}
