package load

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// referenceJSON is the reference request (testdata/reference-request.json at the
// module's root, copied here because go:embed cannot reach a parent folder; a
// test holds the two equal): one create, one processing and one complete body,
// used by every figure.
//
//go:embed reference-request.json
var referenceJSON []byte

// Reference is the reference request's three bodies, compacted.
type Reference struct {
	Create, Processing, Complete []byte
}

// ParseReference reads a reference-request.json document.
func ParseReference(b []byte) (Reference, error) {
	var doc struct {
		Create, Processing, Complete json.RawMessage
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return Reference{}, fmt.Errorf("reference request: %w", err)
	}
	var r Reference
	for _, x := range []struct {
		dst *[]byte
		src json.RawMessage
		n   string
	}{{&r.Create, doc.Create, "create"}, {&r.Processing, doc.Processing, "processing"}, {&r.Complete, doc.Complete, "complete"}} {
		var buf bytes.Buffer
		if len(x.src) == 0 {
			return Reference{}, fmt.Errorf("reference request: no %q body", x.n)
		}
		if err := json.Compact(&buf, x.src); err != nil {
			return Reference{}, fmt.Errorf("reference request %s: %w", x.n, err)
		}
		*x.dst = buf.Bytes()
	}
	return r, nil
}

// Config is one run of the harness.
type Config struct {
	// Duration is the measuring window of one round; Warmup runs before it, unmeasured.
	Duration, Warmup time.Duration
	// Rounds per scenario and server, alternating asyncstatus and baseline (A B A B ...).
	Rounds int
	// Concurrency is the number of connections, each with one call in flight.
	Concurrency int
	// Preload is the number of requests (created, then processing) of the polled tenant.
	Preload int
	// MemN is the number of reference requests of the memory figure; MemWarm more go
	// through first (in another tenant) so that connections and buffers exist before.
	MemN, MemWarm int
	// PollCallers is the number of API keys that poll the preloaded tenant; 0 picks
	// enough that no (caller, request) pair is polled twice during the run.
	PollCallers int
	// RateLimit adds a poll scenario against an asyncstatus with rate limiting on
	// (limits set high so that nothing is refused: it measures the limiter's cost).
	RateLimit bool
	// Profile records a perf profile of asyncstatus and redis-server under the poll load.
	Profile bool
	// Only, when set, runs just the scenarios whose names start with one of these
	// (e.g. "poll", "create"): a quicker loop while working on one path. The
	// memory figure is always measured.
	Only []string
	// QuietWait, when positive, is how long each round may wait for the machine to
	// be quiet (other processes under 10% of its CPU over half a second) first.
	QuietWait time.Duration
	// Procs is asyncstatus's runtime.max_procs (GOMAXPROCS); 0 leaves Go's
	// default, every CPU. BaselineProcs is the baseline's GOMAXPROCS, 0 likewise.
	// Both default to 0: asyncstatus as it ships (runtime.max_procs 0), the
	// baseline likewise, so that the run measures what a user runs (issue of
	// 2026-12-03: a GOMAXPROCS=1 asyncstatus beside a baseline on every CPU
	// reported milder ratios than the shipped settings give).
	Procs, BaselineProcs int
	// Tracing adds the poll and complete scenarios against a second
	// asyncstatus with tracing on (sample_ratio 1), exporting by OTLP/HTTP to
	// a collector in the harness's process that reads each export and
	// discards it, compared with asyncstatus (tracing off) in the same run
	// (docs/reference.md §17; docs/performance.md, Tracing).
	Tracing bool
	// Compare, when set, is a git revision of the module built as a second
	// asyncstatus on a Redis database of its own (its own keys and preload),
	// with the poll and complete scenarios run against it and asyncstatus as
	// built now (tracing off) in the same run: e.g. the commit before tracing
	// was merged, to show that tracing off costs nothing.
	Compare string
	// CompareWith, with Compare, is the git revision built as the first
	// server of those scenarios instead of the working tree (on a Redis
	// database of its own too): the tracing commit against its parent
	// measures tracing off alone, without what other commits changed since.
	CompareWith string
	// AOF adds a second pass of the poll, create and complete scenarios with
	// Redis persisting as production does (CONFIG SET appendonly yes,
	// appendfsync everysec), named with an " [appendonly everysec]" suffix.
	AOF bool
	// Settings are asyncstatus settings other than the shipped ones, as
	// key.path=value ("audit.sink=none"), given to every asyncstatus of the
	// run as ASYNCSTATUS_* variables (settingsEnv); the report says the run
	// is not of the shipped settings.
	Settings []string
	// BuildFlags are passed to go build for both servers (e.g. -race in tests).
	BuildFlags []string
	// Reference overrides the embedded reference request (nil: embedded copy).
	Reference []byte
	// Command is how the run was started, printed with the report.
	Command string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// OutDir, when set, receives the report and the profile.
	OutDir string
}

// DefaultConfig is the full run of `make bench` (about 7 minutes on 2 cores). Four
// rounds of 5 s rather than two of 10 s: the same measuring time, twice the A/B
// alternations, because on a shared VM the machine's speed drifts over tens of
// seconds (one round's ratio moved by up to 20% with two rounds).
func DefaultConfig() Config {
	return Config{Duration: 5 * time.Second, Warmup: time.Second, Rounds: 4, Concurrency: 32,
		Preload: 100_000, MemN: 10_000, MemWarm: 1_000, RateLimit: true, Profile: true, AOF: true, Tracing: true}
}

// DefaultProcs was asyncstatus's GOMAXPROCS in a run before the harness
// measured the shipped default: half the machine, at least one (-procs
// accepts it for comparisons with earlier runs).
func DefaultProcs() int { return max(runtime.NumCPU()/2, 1) }

// QuickConfig is a smoke run of every scenario: seconds, not minutes; its figures
// mean nothing.
func QuickConfig() Config {
	return Config{Duration: 500 * time.Millisecond, Warmup: 200 * time.Millisecond, Rounds: 1, Concurrency: 8,
		Preload: 15_000, MemN: 300, MemWarm: 50, RateLimit: true, AOF: true, Tracing: true}
}

// tenants of the run. The polled tenant holds the preloaded requests; creates and
// completes go to their own tenant; the memory figure has a tenant of its own.
const (
	tenantPoll    = "bench"
	tenantWrite   = "benchw"
	tenantMem     = "benchmem"
	tenantMemWarm = "benchmemwarm"
	pollSecret    = "bench-poll-token-secret-0123456789abcdef"
	// baselineKey stands where asyncstatus has an API key, same length, so that
	// both servers parse the same bytes; the baseline ignores it.
	baselineKey = "ask_baselinebaselinebaselinebaselinebaselinebaselinebaselinebaselineba"
)

// server is one process under test.
type server struct {
	name     string
	addr     string
	p        *proc
	baseline bool
	data     *dataset
	env      []string // asyncstatus: its environment (CLI commands use it too)
	bin      string   // asyncstatus: its binary (CLI commands run it too)
	lastRate map[string]float64
}

// dataset is what the harness knows of the data a server works on. asyncstatus
// with and without rate limiting share one (same Redis keys).
type dataset struct {
	prefix   string   // Redis key prefix
	ids      []string // preloaded requests, in a random order
	tokens   []string // their poll tokens (asyncstatus)
	readKeys []string // API keys of tenantPoll (read, write)
	writeKey string   // API key of tenantWrite

	// walk counters persist across rounds so that no (caller, request) pair is
	// polled twice soon: asyncstatus would pace it (429 POLLED_TOO_EARLY).
	pollSeq, tokenSeq atomic.Uint64
	ikSeq             atomic.Uint64

	poolMu   sync.Mutex
	pool     []string // created, still queued requests of tenantWrite, for complete
	poolNext atomic.Int64
	finished []string // requests complete answered 200 for (under poolMu), for poll (terminal)
}

func (s *server) auth(tenant, key string) []header {
	if s.baseline {
		return []header{{"Authorization", "Bearer " + baselineKey}, {"X-Bench-Tenant", tenant}}
	}
	return []header{{"Authorization", "Bearer " + key}}
}

type harness struct {
	cfg    Config
	ref    Reference
	log    io.Writer
	root   string
	dir    string
	redis  *redisServer
	asBin  string
	blBin  string
	as     *server
	asRL   *server
	asTR   *server // tracing on (Config.Tracing)
	old    *server // built from Config.Compare
	cur    *server // built from Config.CompareWith; else asyncstatus
	bl     *server
	col    *collector // Config.Tracing's OTLP/HTTP collector
	oldBin string
	curBin string
	all    []*server
	report *Report
}

// exitedLogs is, for each server whose process has ended, its exit and the
// end of its log: a scenario that fails on a refused connection says why.
func (h *harness) exitedLogs() string {
	var b strings.Builder
	for _, s := range h.all {
		if s.p != nil && s.p.exited() {
			fmt.Fprintf(&b, "\n%s exited (%v):\n%s", s.name, s.p.waitErr, s.p.logTail(40))
		}
	}
	return b.String()
}

// wanted reports whether the scenario is to run (Config.Only).
func (h *harness) wanted(name string) bool {
	if len(h.cfg.Only) == 0 {
		return true
	}
	for _, p := range h.cfg.Only {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func (h *harness) logf(format string, a ...any) {
	fmt.Fprintf(h.log, "bench %5.1fs: "+format+"\n", append([]any{time.Since(h.report.Started).Seconds()}, a...)...)
}

// Run starts redis-server, asyncstatus and the baseline, measures every scenario
// and the memory per request, writes the report to out and returns it.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Report, error) {
	if cfg.Rounds < 1 || cfg.Concurrency < 1 || cfg.Duration <= 0 || cfg.Preload < 1 || cfg.MemN < 1 {
		return nil, errors.New("rounds, concurrency, duration, preload and mem-n must be positive")
	}
	refDoc := cfg.Reference
	if refDoc == nil {
		refDoc = referenceJSON
	}
	ref, err := ParseReference(refDoc)
	if err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg, ref: ref, log: cfg.Log, report: &Report{Config: cfg, Started: time.Now()}}
	if h.log == nil {
		h.log = io.Discard
	}
	if h.root, err = moduleRoot(); err != nil {
		return nil, err
	}
	if h.dir, err = os.MkdirTemp("", "asyncstatus-bench-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(h.dir)
	defer h.stopAll()

	if err := h.start(ctx); err != nil {
		return nil, err
	}
	if err := h.measureMemory(ctx); err != nil {
		return nil, err
	}
	if err := h.prepare(ctx); err != nil {
		return nil, err
	}
	for _, sc := range h.scenarios() {
		if !h.wanted(sc.name) || (sc.name == scenarioPollDone && !h.wanted(scenarioComplete)) {
			continue
		}
		if err := h.runScenario(ctx, sc); err != nil {
			return nil, fmt.Errorf("%s: %w%s", sc.name, err, h.exitedLogs())
		}
		if sc.name == scenarioCreate {
			if err := h.measureIdempotency(ctx); err != nil {
				return nil, err
			}
		}
	}
	if cfg.AOF {
		if err := h.runAOF(ctx); err != nil {
			return nil, err
		}
	}
	h.tracingNotes()
	h.checkLogs()
	h.checkQuiet()
	h.report.Finished = time.Now()
	md := h.report.Markdown()
	if _, err := io.WriteString(out, md); err != nil {
		return nil, err
	}
	if cfg.OutDir != "" {
		if err := os.MkdirAll(cfg.OutDir, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(cfg.OutDir, "latest.md"), []byte(md), 0o644)
		}
	}
	return h.report, nil
}

func (h *harness) stopAll() {
	for _, s := range h.all {
		s.p.stop()
	}
	if h.col != nil {
		h.col.close()
	}
	if h.redis != nil {
		h.redis.close()
	}
}

// start builds both servers and starts redis-server, asyncstatus (rate limiting
// off), the baseline and, with cfg.RateLimit, asyncstatus with rate limiting on.
func (h *harness) start(ctx context.Context) error {
	h.asBin, h.blBin = filepath.Join(h.dir, "asyncstatus"), filepath.Join(h.dir, "baseline")
	t0 := time.Now()
	var wg sync.WaitGroup
	var errAS, errBL error
	wg.Go(func() { errAS = build(ctx, h.root, "./cmd/asyncstatus", h.asBin, h.cfg.BuildFlags) })
	wg.Go(func() { errBL = build(ctx, h.root, "./bench/baseline", h.blBin, h.cfg.BuildFlags) })
	var errOld, errCur error
	if h.cfg.Compare != "" {
		h.oldBin = filepath.Join(h.dir, "asyncstatus-old")
		wg.Go(func() {
			errOld = buildRevision(ctx, h.root, h.cfg.Compare, filepath.Join(h.dir, "old-src"), h.oldBin, h.cfg.BuildFlags)
		})
		if h.cfg.CompareWith != "" {
			h.curBin = filepath.Join(h.dir, "asyncstatus-cur")
			wg.Go(func() {
				errCur = buildRevision(ctx, h.root, h.cfg.CompareWith, filepath.Join(h.dir, "cur-src"), h.curBin, h.cfg.BuildFlags)
			})
		}
	} else if h.cfg.CompareWith != "" {
		return errors.New("compare-with needs compare")
	}
	wg.Wait()
	if err := errors.Join(errAS, errBL, errOld, errCur); err != nil {
		return err
	}
	h.logf("built ./cmd/asyncstatus and ./bench/baseline %sin %s", strings.Join(append(h.cfg.BuildFlags, ""), " "),
		time.Since(t0).Round(100*time.Millisecond))
	for _, rev := range []string{h.cfg.Compare, h.cfg.CompareWith} {
		if rev != "" {
			h.logf("built ./cmd/asyncstatus at %s", rev)
		}
	}
	var err error
	if h.redis, err = startRedis(ctx, h.dir); err != nil {
		return err
	}
	h.logf("redis-server %s (pid %d)", h.redis.addr, h.redis.pid())
	h.report.Machine = machine()
	if f, err := h.redis.info(ctx, "server"); err == nil {
		h.report.Machine += ", redis-server " + f["redis_version"]
	}

	asData := &dataset{prefix: "as"}
	if h.as, err = h.startAsyncstatus(ctx, "asyncstatus", h.asBin, "asyncstatus.log", asData); err != nil {
		return err
	}
	if h.cfg.RateLimit {
		// High enough that nothing is refused: this measures what the limiter costs.
		if h.asRL, err = h.startAsyncstatus(ctx, "asyncstatus (rate limit on)", h.asBin, "asyncstatus-ratelimit.log", asData,
			"ASYNCSTATUS_RATELIMIT_ENABLED=true", "ASYNCSTATUS_RATELIMIT_READ=10000000-S", "ASYNCSTATUS_RATELIMIT_WRITE=10000000-S",
			"ASYNCSTATUS_RATELIMIT_TENANT=10000000-S"); err != nil {
			return err
		}
	}
	if err := h.startTracing(ctx, asData); err != nil {
		return err
	}
	if err := h.startOld(ctx); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var env []string // nil: this process's environment
	if h.cfg.BaselineProcs > 0 {
		env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(h.cfg.BaselineProcs))
	}
	p, err := startProc("baseline", h.blBin, []string{"-addr", addr, "-redis", "redis://" + h.redis.addr + "/0", "-prefix", "bl"},
		env, h.dir, filepath.Join(h.dir, "baseline.log"))
	if err != nil {
		return err
	}
	h.bl = &server{name: "baseline", addr: addr, p: p, baseline: true, data: &dataset{prefix: "bl"}, lastRate: map[string]float64{}}
	h.all = append(h.all, h.bl)
	return waitHTTP(ctx, h.bl)
}

// startAsyncstatus starts bin serve as server name on the harness's Redis,
// with the harness's settings and then extra (KEY=value, later ones win).
func (h *harness) startAsyncstatus(ctx context.Context, name, bin, logName string, data *dataset, extra ...string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ASYNCSTATUS_") {
			env = append(env, kv)
		}
	}
	env = append(env, "ASYNCSTATUS_REDIS_URL=redis://"+h.redis.addr+"/0", "ASYNCSTATUS_HTTP_ADDR="+addr,
		"ASYNCSTATUS_CONSOLE_ADDR=off", // the console is not measured, and its port may be taken
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET="+pollSecret, "ASYNCSTATUS_RATELIMIT_ENABLED=false",
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY="+pollSecret, "ASYNCSTATUS_RUNTIME_MAX_PROCS="+strconv.Itoa(h.cfg.Procs),
		// One step of 1 s: the poll-token walk comes back to a request every Preload
		// calls, which on a fast machine is sooner than the default schedule's later
		// steps (5 s, 10 s, 30 s) allow. Every poll is still paced: the pacing
		// state is read and written as with any schedule.
		"ASYNCSTATUS_POLLING_SCHEDULE=1s")
	set, err := settingsEnv(h.cfg.Settings)
	if err != nil {
		return nil, err
	}
	for _, kv := range append(set, extra...) {
		k, _, _ := strings.Cut(kv, "=")
		env = slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") })
		env = append(env, kv)
	}
	p, err := startProc(name, bin, []string{"serve"}, env, h.dir, filepath.Join(h.dir, logName))
	if err != nil {
		return nil, err
	}
	s := &server{name: name, addr: addr, p: p, data: data, env: env, bin: bin, lastRate: map[string]float64{}}
	h.all = append(h.all, s)
	h.logf("%s on %s (pid %d)", name, addr, p.pid())
	if err := waitHTTP(ctx, s); err != nil {
		return s, err
	}
	// serve logs the GOMAXPROCS it runs with: a run must not report one setting
	// and measure another.
	if want := fmt.Sprintf(`"max_procs":%d`, h.cfg.Procs); h.cfg.Procs > 0 && p.logHas(want)[want] == "" {
		return s, fmt.Errorf("%s does not run with GOMAXPROCS %d (runtime.max_procs):\n%s", name, h.cfg.Procs, p.logTail(20))
	}
	return s, nil
}

// waitHTTP waits until the server answers GET /healthz with 200.
func waitHTTP(ctx context.Context, s *server) error {
	cl := newHTTPClient(s.addr, 1)
	defer cl.close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s.p.exited() {
			return fmt.Errorf("%s exited at start (%v):\n%s", s.name, s.p.waitErr, s.p.logTail(20))
		}
		if st, _, err := cl.do("GET", "/healthz", nil); err == nil && st == 200 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not answer /healthz within 30s:\n%s", s.name, s.p.logTail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// only lets s run and stops (SIGSTOP) every other server, so that the one under
// test has the machine and Redis to itself.
func (h *harness) only(s *server) {
	for _, o := range h.all {
		if o != s {
			o.p.pause()
		}
	}
	s.p.resume()
}

func (h *harness) resumeAll() {
	for _, o := range h.all {
		o.p.resume()
	}
}

// createKey makes an API key of s with the asyncstatus command line, as an operator would.
func (h *harness) createKey(ctx context.Context, s *server, tenant, scopes, name string) (string, error) {
	cmd := exec.CommandContext(ctx, s.bin, "keys", "create", "--tenant", tenant, "--scopes", scopes, "--name", name)
	cmd.Env = s.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("asyncstatus keys create --tenant %s: %w\n%s", tenant, err, stderr.String())
	}
	key := strings.TrimSpace(stdout.String())
	if key == "" || strings.ContainsAny(key, " \n") {
		return "", fmt.Errorf("asyncstatus keys create printed %q, want the key alone", stdout.String())
	}
	return key, nil
}

func (h *harness) createKeys(ctx context.Context, s *server, tenant, scopes string, n int) ([]string, error) {
	keys := make([]string, n)
	err := parallel(ctx, n, 4, func(i int) error {
		k, err := h.createKey(ctx, s, tenant, scopes, "bench-"+strconv.Itoa(i))
		keys[i] = k
		return err
	})
	return keys, err
}

// prepare makes the API keys and preloads the polled tenant on every data set.
func (h *harness) prepare(ctx context.Context) error {
	ases := []*server{h.as}
	if h.old != nil {
		ases = append(ases, h.old)
	}
	if h.cur != h.as {
		ases = append(ases, h.cur)
	}
	for _, s := range ases {
		first := make([]string, 2)
		if err := parallel(ctx, 2, 2, func(i int) (err error) {
			first[i], err = h.createKey(ctx, s, []string{tenantWrite, tenantPoll}[i], "read,write", "bench")
			return err
		}); err != nil {
			return err
		}
		s.data.writeKey, s.data.readKeys = first[0], first[1:]
	}
	b := h.bl.data
	b.readKeys, b.writeKey = []string{baselineKey}, baselineKey

	var writes float64 // calls/s asyncstatus managed while preloading
	for _, s := range append(ases, h.bl) {
		h.only(s)
		t0 := time.Now()
		if err := h.preload(ctx, s); err != nil {
			return fmt.Errorf("preload %s: %w", s.name, err)
		}
		el := time.Since(t0)
		if s == h.as {
			writes = 2 * float64(h.cfg.Preload) / el.Seconds()
		}
		h.logf("preloaded %d requests (create + processing) on %s in %s", h.cfg.Preload, s.name, el.Round(100*time.Millisecond))
	}
	h.resumeAll()

	callers := h.cfg.PollCallers
	if callers <= 0 {
		// Enough callers that the walk over (caller, request) pairs does not come
		// back to a pair during the run: the poll scenarios (and the profile) make
		// at most 3 (4 with the appendonly pass) x rounds x (warm-up + window) of
		// polls, at (assumed) no more than 4 times the rate asyncstatus took writes at.
		scenarios := 3.0
		if h.cfg.AOF {
			scenarios++
		}
		polls := 4 * writes * (h.cfg.Duration + h.cfg.Warmup).Seconds() * float64(h.cfg.Rounds+1) * scenarios
		callers = min(max(int(polls/float64(h.cfg.Preload))+1, 2), 64)
	}
	if callers > 1 {
		for _, s := range ases {
			h.logf("creating %d more API keys of %s with `asyncstatus keys create` (%d callers poll)", callers-1, s.name, callers)
			more, err := h.createKeys(ctx, s, tenantPoll, "read", callers-1)
			if err != nil {
				return err
			}
			s.data.readKeys = append(s.data.readKeys, more...)
		}
	}
	return nil
}

// preload creates cfg.Preload requests in the polled tenant and moves them to
// processing, through the server's own HTTP API; the poll scenarios read them.
func (h *harness) preload(ctx context.Context, s *server) error {
	n := h.cfg.Preload
	d := s.data
	ids, tokens := make([]string, n), make([]string, n)
	cl := newHTTPClient(s.addr, 64)
	defer cl.close()
	err := parallel(ctx, n, 64, func(i int) error {
		hdr := s.auth(tenantPoll, d.readKeys[i%len(d.readKeys)])
		st, body, err := cl.do("POST", "/v1/requests", h.ref.Create, hdr...)
		if err != nil {
			return err
		}
		if st != 202 {
			return fmt.Errorf("create answered %d: %s", st, truncate(string(body), 300))
		}
		var r struct {
			ID        string `json:"id"`
			PollToken string `json:"poll_token"`
		}
		if err := json.Unmarshal(body, &r); err != nil || r.ID == "" {
			return fmt.Errorf("create answer without id: %s", truncate(string(body), 300))
		}
		ids[i], tokens[i] = r.ID, r.PollToken
		st, body, err = cl.do("POST", "/v1/requests/"+r.ID+"/processing", h.ref.Processing, hdr...)
		if err != nil {
			return err
		}
		if st != 200 {
			return fmt.Errorf("processing answered %d: %s", st, truncate(string(body), 300))
		}
		return nil
	})
	if err != nil {
		return err
	}
	// A random order, so that consecutive polls hit unrelated records.
	perm := rand.Perm(n)
	d.ids, d.tokens = make([]string, n), make([]string, n)
	for i, j := range perm {
		d.ids[i], d.tokens[i] = ids[j], tokens[j]
	}
	return nil
}

// waitQuiet waits, up to cfg.QuietWait, until processes other than ours leave the
// machine nearly idle: on a shared machine, a round then starts between other
// people's bursts rather than inside one.
func (h *harness) waitQuiet(ctx context.Context) {
	if h.cfg.QuietWait <= 0 {
		return
	}
	ours := func() float64 {
		t := selfCPUSeconds()
		for _, p := range append([]*proc{h.redis.proc}, h.procs()...) {
			c, _ := cpuSeconds(p.pid())
			t += c
		}
		return t
	}
	deadline := time.Now().Add(h.cfg.QuietWait)
	for ctx.Err() == nil {
		m0, _ := machineBusySeconds()
		o0, t0 := ours(), time.Now()
		time.Sleep(500 * time.Millisecond)
		m1, _ := machineBusySeconds()
		share := (m1 - m0 - (ours() - o0)) / (time.Since(t0).Seconds() * float64(runtime.NumCPU()))
		if share < 0.10 {
			return
		}
		if time.Now().After(deadline) {
			h.logf("  the machine stayed busy (other processes at %.0f%% of its CPU); going on", 100*share)
			return
		}
	}
}

func (h *harness) procs() []*proc {
	ps := make([]*proc, len(h.all))
	for i, s := range h.all {
		ps[i] = s.p
	}
	return ps
}

// checkQuiet flags a run during which other processes took a noticeable share
// of the machine: the alternation A B A B spreads such noise over both servers
// only roughly, and the CPU per answer then understates the contention.
func (h *harness) checkQuiet() {
	var worst float64
	var where string
	for _, r := range h.report.Rows {
		if r.Ran() && r.Foreign() > worst {
			worst, where = r.Foreign(), r.Scenario+" on "+r.Server
		}
	}
	if worst > 0.10 {
		h.report.Warnings = append(h.report.Warnings, fmt.Sprintf("other processes used up to %.0f%% of the machine's CPU "+
			"during the measuring windows (%s): the figures are disturbed; run again on a quiet machine", 100*worst, where))
	}
}

// checkLogs reports what the servers' logs say that a benchmark must not hide.
func (h *harness) checkLogs() {
	for _, s := range h.all {
		for needle, line := range s.p.logHas("DATA RACE", "panic") {
			h.report.Problems = append(h.report.Problems, fmt.Sprintf("%s: its log says %q: %s", s.name, needle, line))
		}
	}
}

// settingsEnv turns key.path=value settings into the ASYNCSTATUS_KEY_PATH=value
// variables serve reads (docs/reference.md, configuration).
func settingsEnv(settings []string) ([]string, error) {
	out := make([]string, 0, len(settings))
	for _, kv := range settings {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsFunc(k, func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.' && r != '_'
		}) {
			return nil, fmt.Errorf("bench: setting %q is not key.path=value (lower-case key)", kv)
		}
		out = append(out, "ASYNCSTATUS_"+strings.ToUpper(strings.ReplaceAll(k, ".", "_"))+"="+v)
	}
	return out, nil
}
