package load

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// profile records asyncstatus and redis-server with perf during one extra,
// unmeasured poll round and keeps the top of the report. Without perf (or without
// the right to use it) the report says so and the run goes on.
func (h *harness) profile(ctx context.Context, sc scenario) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		h.report.Profile = "not recorded: perf is not installed"
		return
	}
	h.only(sc.a)
	data := filepath.Join(h.dir, "perf.data")
	secs := strconv.Itoa(max(int(h.cfg.Duration.Seconds()), 1))
	rec := exec.CommandContext(ctx, perf, "record", "-F", "499", "-g", "-o", data,
		"-p", fmt.Sprintf("%d,%d", sc.a.p.pid(), h.redis.pid()), "--", "sleep", secs)
	out := &strings.Builder{}
	rec.Stdout, rec.Stderr = out, out
	if err := rec.Start(); err != nil {
		h.report.Profile = "not recorded: " + err.Error()
		return
	}
	h.logf("%s: extra round under perf record (not counted)", sc.name)
	w := sc.work(sc.a)
	res, err := runRound(ctx, sc.a.addr, h.cfg.Concurrency, 300*time.Millisecond, time.Duration(max(int(h.cfg.Duration.Seconds()), 1))*time.Second,
		w, meters{serverPID: sc.a.p.pid(), redis: h.redis})
	if werr := rec.Wait(); werr != nil {
		h.report.Profile = fmt.Sprintf("not recorded: perf record: %v\n%s", werr, truncate(out.String(), 500))
		return
	}
	if err != nil {
		h.report.Profile = "not recorded: " + err.Error()
		return
	}
	report := func(n int, keep *regexp.Regexp, args ...string) string {
		cmd := exec.CommandContext(ctx, perf, append([]string{"report", "-i", data, "--stdio", "-g", "none"}, args...)...)
		b, err := cmd.Output()
		if err != nil {
			return "perf report: " + err.Error() + "\n"
		}
		return perfTable(string(b), n, keep)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "`perf record -F 499 -g` on asyncstatus and redis-server for %s s of %q at %d connections "+
		"(%.0f answers/s under the profiler; an extra round, not in the table).\n\n", secs, sc.name, h.cfg.Concurrency,
		float64(res.Good)/res.Elapsed.Seconds())
	b.WriteString("Samples by process (`--sort comm`):\n\n```\n")
	b.WriteString(report(5, nil, "--no-children", "--sort", "comm"))
	b.WriteString("```\n\nasyncstatus, self time (`--no-children --comm asyncstatus --sort dso,sym`):\n\n```\n")
	b.WriteString(report(25, nil, "--no-children", "--comm", "asyncstatus", "--sort", "dso,sym"))
	b.WriteString("```\n\nasyncstatus, inclusive time of its own code and of the usual cost centres " +
		"(`--children --comm asyncstatus --sort sym`, filtered):\n\n```\n")
	b.WriteString(report(40, costCentres, "--children", "--comm", "asyncstatus", "--sort", "sym", "--percent-limit", "1"))
	b.WriteString("```\n\nredis-server, self time (`--no-children --comm redis-server --sort dso,sym`; " +
		"Debian's redis-server is a link to redis-check-rdb):\n\n```\n")
	b.WriteString(report(12, nil, "--no-children", "--comm", "redis-server", "--sort", "dso,sym"))
	b.WriteString("```\n")
	h.report.Profile = b.String()
	if h.cfg.OutDir != "" {
		if err := os.MkdirAll(h.cfg.OutDir, 0o755); err == nil {
			// perf record put the binaries in its build-id cache: perf report -i finds them.
			if b, err := os.ReadFile(data); err == nil {
				_ = os.WriteFile(filepath.Join(h.cfg.OutDir, "perf.data"), b, 0o644)
			}
		}
	}
}

// costCentres are the frames worth reading in an inclusive profile of the
// server: its own packages, and where Go servers usually spend their time.
var costCentres = regexp.MustCompile(`asyncstatus/|encoding/json\.(Marshal|Unmarshal|Compact)$|` +
	`go-redis/v9\.\(\*Script\)\.Run$|go-redis/v9\.\(\*baseClient\)\.(_process|withConn)$|` +
	`runtime\.(mallocgc|gcBgMarkWorker|findRunnable|mcall)$|` +
	`fasthttp\.\(\*Server\)\.serveConn$|fasthttp\.\(\*Ctx\)|fiber/v2\.\(\*App\)\.handler$|` +
	`internal/runtime/syscall\.Syscall6$|ulule/limiter|prometheus`)

// perfTable keeps the first n sample lines of a perf report (those whose last
// column matches keep, when set), without its comments.
func perfTable(report string, n int, keep *regexp.Regexp) string {
	var out []string
	for line := range strings.Lines(report) {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if keep != nil {
			f := strings.Fields(t)
			if len(f) == 0 || !keep.MatchString(f[len(f)-1]) {
				continue
			}
		}
		out = append(out, strings.TrimRight(line, "\n"))
		if len(out) == n {
			break
		}
	}
	return strings.Join(out, "\n") + "\n"
}
