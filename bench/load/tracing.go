package load

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The scenarios of tracing's cost (Config.Tracing) and of a build of another
// revision (Config.Compare). Both compare two asyncstatus servers, so their
// second row stands where the baseline stands in the others.
const (
	scenarioTracePoll     = "tracing on: poll (Bearer)"
	scenarioTraceComplete = "tracing on: complete"
	scenarioOldCreate     = "off vs older build: create"
	scenarioOldPoll       = "off vs older build: poll (Bearer)"
	scenarioOldComplete   = "off vs older build: complete"
)

// collector is an OTLP/HTTP trace endpoint that reads each export and
// discards it, answering as a collector that took everything does. It runs
// in the harness's process, so that its work counts as the load
// generator's, as a collector elsewhere costs the server nothing: only what
// asyncstatus spends on its spans and their export is charged to it.
type collector struct {
	srv            *http.Server
	addr           string
	exports, bytes atomic.Int64
	wrong          atomic.Int64 // requests that were not an OTLP/HTTP protobuf export
}

func startCollector() (*collector, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c := &collector{addr: "127.0.0.1:" + strconv.Itoa(port)}
	l, err := net.Listen("tcp", c.addr)
	if err != nil {
		return nil, err
	}
	c.srv = &http.Server{Handler: http.HandlerFunc(c.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.srv.Serve(l) }()
	return c, nil
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		c.wrong.Add(1)
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	c.exports.Add(1)
	c.bytes.Add(n)
	// An empty ExportTraceServiceResponse: zero bytes of protobuf.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (c *collector) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.srv.Shutdown(ctx)
}

// startTracing starts, with Config.Tracing, the collector and asyncstatus
// with tracing on at sample_ratio 1, on the data of asyncstatus (tracing off).
func (h *harness) startTracing(ctx context.Context, data *dataset) error {
	if !h.cfg.Tracing {
		return nil
	}
	var err error
	if h.col, err = startCollector(); err != nil {
		return fmt.Errorf("OTLP collector: %w", err)
	}
	h.asTR, err = h.startAsyncstatus(ctx, "asyncstatus (tracing on)", h.asBin, "asyncstatus-tracing.log", data,
		"ASYNCSTATUS_TRACING_OTLP_ENDPOINT=http://"+h.col.addr, "ASYNCSTATUS_TRACING_SAMPLE_RATIO=1")
	return err
}

// startOld starts, with Config.Compare, the build of that revision on a Redis
// database of its own (1): the two builds' key schemas may differ; and with
// Config.CompareWith, that revision's on database 2.
func (h *harness) startOld(ctx context.Context) error {
	h.cur = h.as
	if h.cfg.Compare == "" {
		return nil
	}
	var err error
	h.old, err = h.startAsyncstatus(ctx, "asyncstatus "+h.cfg.Compare, h.oldBin, "asyncstatus-old.log", &dataset{prefix: "as"},
		"ASYNCSTATUS_REDIS_URL=redis://"+h.redis.addr+"/1")
	if err != nil || h.cfg.CompareWith == "" {
		return err
	}
	h.cur, err = h.startAsyncstatus(ctx, "asyncstatus "+h.cfg.CompareWith, h.curBin, "asyncstatus-cur.log", &dataset{prefix: "as"},
		"ASYNCSTATUS_REDIS_URL=redis://"+h.redis.addr+"/2")
	return err
}

// buildRevision builds ./cmd/asyncstatus as the module was at rev (git
// archive into src, which must not exist), for Config.Compare.
func buildRevision(ctx context.Context, root, rev, src, out string, flags []string) error {
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", rev)
	var tarball, stderr bytes.Buffer
	archive.Stdout, archive.Stderr = &tarball, &stderr
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s: %w\n%s", rev, err, stderr.String())
	}
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	untar.Stdin = &tarball
	if b, err := untar.CombinedOutput(); err != nil {
		return fmt.Errorf("unpack %s: %w\n%s", rev, err, b)
	}
	if err := build(ctx, src, "./cmd/asyncstatus", out, flags); err != nil {
		return fmt.Errorf("at %s: %w", rev, err)
	}
	return nil
}

// moreScenarios are Config.Tracing's and Config.Compare's scenarios: poll and
// complete, asyncstatus (tracing on) against asyncstatus (tracing off), and
// create, poll and complete, asyncstatus (or Config.CompareWith's build)
// against the older build. The create is there because it is the write whose
// ratio to the yardstick moves most between runs: two builds alternated in
// one run are what separates a change to it from the machine's drift.
func (h *harness) moreScenarios() []scenario {
	var list []scenario
	if h.asTR != nil {
		list = append(list,
			scenario{name: scenarioTracePoll, a: h.asTR, b: h.as, target: target{minRate: 0.85}, work: h.pollWork(false),
				note: "the second row is asyncstatus with tracing off; spans go to a collector in the harness's process that discards them"},
			scenario{name: scenarioTraceComplete, a: h.asTR, b: h.as, target: target{minRate: 0.85}, work: h.completeWork,
				before: h.topUpPoolOf(scenarioTraceComplete)})
	}
	if h.old != nil {
		list = append(list,
			scenario{name: scenarioOldCreate, a: h.cur, b: h.old, work: h.createWork,
				note: "the second row is asyncstatus built from " + h.cfg.Compare + ", on a Redis database of its own"},
			scenario{name: scenarioOldPoll, a: h.cur, b: h.old, work: h.pollWork(false)},
			scenario{name: scenarioOldComplete, a: h.cur, b: h.old, work: h.completeWork,
				before: h.topUpPoolOf(scenarioOldComplete)})
	}
	return list
}

// tracingNotes says what the collector received and what asyncstatus
// (tracing on) counted, so that a run whose spans did not all go out says so.
func (h *harness) tracingNotes() {
	if h.asTR == nil || h.col == nil {
		return
	}
	h.asTR.p.resume()
	exported, dropped := metricValue(h.asTR, "asyncstatus_tracing_spans_exported_total"),
		metricValue(h.asTR, "asyncstatus_tracing_spans_dropped_total")
	h.report.Notes = append(h.report.Notes, fmt.Sprintf("tracing: the collector took %d exports (%.1f MB of protobuf); "+
		"asyncstatus (tracing on) counted %s spans exported and %s dropped (/metrics)",
		h.col.exports.Load(), float64(h.col.bytes.Load())/1e6, exported, dropped))
	if n := h.col.wrong.Load(); n > 0 {
		h.report.Problems = append(h.report.Problems, fmt.Sprintf("the OTLP collector got %d requests that were not trace exports", n))
	}
	if dropped != "0" {
		h.report.Warnings = append(h.report.Warnings, "asyncstatus (tracing on) dropped spans ("+dropped+
			"): the tracing figures measured less than every span's export")
	}
}

// metricValue is the value of an unlabelled series on s's /metrics, as text;
// "n/a" when it cannot be read.
func metricValue(s *server, name string) string {
	cl := newHTTPClient(s.addr, 1)
	defer cl.close()
	st, body, err := cl.do("GET", "/metrics", nil)
	if err != nil || st != 200 {
		return "n/a"
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return "n/a"
}
