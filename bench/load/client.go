package load

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// httpClient talks to one server over keep-alive connections (fasthttp: the load
// generator shares two cores with the server and Redis, so its own cost matters).
type httpClient struct {
	hc   *fasthttp.HostClient
	base string // http://host:port
}

func newHTTPClient(addr string, conns int) *httpClient {
	return &httpClient{base: "http://" + addr, hc: &fasthttp.HostClient{
		Addr: addr, MaxConns: conns, ReadTimeout: 15 * time.Second, WriteTimeout: 15 * time.Second,
		MaxIdleConnDuration: time.Minute, MaxConnWaitTimeout: 15 * time.Second,
	}}
}

func (c *httpClient) close() { c.hc.CloseIdleConnections() }

// header is one request header.
type header struct{ name, value string }

// fill sets up req; hdrs are added after Content-Type (set when body is not nil).
func (c *httpClient) fill(req *fasthttp.Request, method, path string, body []byte, hdrs ...header) {
	req.Header.SetMethod(method)
	req.SetRequestURI(c.base + path)
	for _, h := range hdrs {
		req.Header.Set(h.name, h.value)
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
}

// do makes one call outside measurement (set-up, preload, memory runs) and
// returns the status, a copy of the body and the named response header.
func (c *httpClient) do(method, path string, body []byte, hdrs ...header) (int, []byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	c.fill(req, method, path, body, hdrs...)
	if err := c.hc.Do(req, resp); err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode(), slices.Clone(resp.Body()), nil
}

// parallel runs job(i) for i in [0, n) on conc goroutines and stops at the first error.
func parallel(ctx context.Context, n, conc int, job func(i int) error) error {
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := job(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n)) // the others stop too
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// verdict classifies one answer of a measured call.
type verdict int

const (
	good  verdict = iota // the answer the scenario expects
	paced                // 429 POLLED_TOO_EARLY: correct behaviour, but not a served poll
	wrong                // anything else
)

// workload describes the calls of one measured round.
type workload struct {
	// next fills the next call's request (req is reset); false means nothing is
	// left (the pool of requests to complete ran out).
	next func(req *fasthttp.Request) bool
	// judge classifies an answer.
	judge func(status int, body []byte) verdict
	// keep, if set, sees the body of every good answer (to collect created ids).
	keep func(worker int, body []byte)
	// sniff, if set, sees the first good answer's headers (e.g. RateLimit-*).
	sniff func(h *fasthttp.ResponseHeader)
}

// roundResult is what one measured round of one server produced. Counts, CPU and
// latencies cover the measuring window only (warm-up excluded).
type roundResult struct {
	Good, Paced, Wrong, Errors int
	Statuses                   map[int]int // status codes of wrong answers
	WrongSample                string      // the body of one wrong answer or a transport error
	Elapsed                    time.Duration
	Latencies                  []time.Duration // of good answers
	CPUServer, CPURedis        float64         // seconds
	CPULoad                    float64         // the load generator's own CPU seconds
	CPUMachine                 float64         // CPU seconds the whole machine was busy
	RedisCmds                  int64           // commands Redis processed (script inner calls included)
	RedisReads                 int64           // reads from client sockets Redis made (pipelined commands share one)
	Exhausted                  bool            // the workload ran out before the window ended
}

// meters snapshots the counters that a round's figures are deltas of.
type meters struct {
	serverPID int
	redis     *redisServer
}

type snapshot struct {
	at                               time.Time
	server, redis, loadself, machine float64
	cmds, reads                      int64
}

func (m meters) take(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now(), loadself: selfCPUSeconds()}
	var err1, err2, err3, err4 error
	s.server, err1 = cpuSeconds(m.serverPID)
	s.redis, err2 = cpuSeconds(m.redis.pid())
	s.machine, err3 = machineBusySeconds()
	var f map[string]string
	f, err4 = m.redis.info(ctx, "stats")
	s.cmds = infoInt(f, "total_commands_processed")
	s.reads = infoInt(f, "total_reads_processed")
	return s, errors.Join(err1, err2, err3, err4)
}

// runRound drives one server with conc closed-loop workers: warm-up, then a
// measuring window of length d. Every worker has one connection and one call in
// flight at a time.
func runRound(ctx context.Context, addr string, conc int, warmup, d time.Duration, w workload, m meters) (roundResult, error) {
	cl := newHTTPClient(addr, conc)
	defer cl.close()

	start := time.Now()
	// Window bounds in nanoseconds since start; workers count answers that
	// complete inside [winStart, winEnd).
	var winStart, winEnd atomic.Int64
	winStart.Store(1 << 62)
	winEnd.Store(1 << 62)
	var stop atomic.Bool
	var sniffOnce sync.Once

	type tally struct {
		good, paced, wrong, errs int
		statuses                 map[int]int
		sample                   string
		lat                      []time.Duration
	}
	tallies := make([]tally, conc)
	var wg sync.WaitGroup
	allDone := make(chan struct{})
	for wi := range conc {
		wg.Go(func() {
			t := &tallies[wi]
			t.statuses = map[int]int{}
			t.lat = make([]time.Duration, 0, 1<<14)
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for !stop.Load() && ctx.Err() == nil {
				req.Reset()
				if !w.next(req) {
					return
				}
				t0 := time.Now()
				err := cl.hc.Do(req, resp)
				done := time.Since(start)
				in := int64(done) >= winStart.Load() && int64(done) < winEnd.Load()
				if err != nil {
					if in {
						t.errs++
						if t.sample == "" {
							t.sample = err.Error()
						}
					}
					continue
				}
				body := resp.Body()
				v := w.judge(resp.StatusCode(), body)
				if v == good {
					if w.keep != nil {
						w.keep(wi, body)
					}
					if w.sniff != nil {
						sniffOnce.Do(func() { w.sniff(&resp.Header) })
					}
				}
				if !in {
					continue
				}
				switch v {
				case good:
					t.good++
					t.lat = append(t.lat, done-t0.Sub(start))
				case paced:
					t.paced++
				default:
					t.wrong++
					t.statuses[resp.StatusCode()]++
					if t.sample == "" {
						t.sample = fmt.Sprintf("%d %s", resp.StatusCode(), truncate(string(body), 300))
					}
				}
			}
		})
	}
	go func() { wg.Wait(); close(allDone) }()

	var res roundResult
	wait := func(dur time.Duration) bool { // false: every worker has stopped
		select {
		case <-time.After(dur):
			return true
		case <-allDone:
			return false
		case <-ctx.Done():
			return false
		}
	}
	if !wait(warmup) {
		stop.Store(true)
		<-allDone
		if err := ctx.Err(); err != nil {
			return res, err
		}
		return res, errors.New("the workload ran out during the warm-up: give it a larger pool")
	}
	// The bounds are set before the snapshots so that no answer is counted that
	// completed outside them; the snapshots trail them by well under a millisecond.
	ws := time.Since(start)
	winStart.Store(int64(ws))
	s0, err := m.take(ctx)
	if err != nil {
		stop.Store(true)
		<-allDone
		return res, err
	}
	full := wait(d)
	we := time.Since(start)
	winEnd.Store(int64(we))
	s1, err := m.take(ctx)
	stop.Store(true)
	<-allDone
	if err != nil {
		return res, err
	}
	if e := ctx.Err(); e != nil {
		return res, e
	}
	res = roundResult{Statuses: map[int]int{}, Elapsed: we - ws, Exhausted: !full,
		CPUServer: s1.server - s0.server, CPURedis: s1.redis - s0.redis, CPULoad: s1.loadself - s0.loadself,
		CPUMachine: s1.machine - s0.machine,
		RedisCmds:  s1.cmds - s0.cmds - 1, // the INFO that took s0
		RedisReads: s1.reads - s0.reads - 1}
	for _, t := range tallies {
		res.Good += t.good
		res.Paced += t.paced
		res.Wrong += t.wrong
		res.Errors += t.errs
		for k, v := range t.statuses {
			res.Statuses[k] += v
		}
		if res.WrongSample == "" {
			res.WrongSample = t.sample
		}
		res.Latencies = append(res.Latencies, t.lat...)
	}
	return res, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// percentile of sorted latencies (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
