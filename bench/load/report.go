package load

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Report is everything one run measured.
type Report struct {
	Config            Config
	Started, Finished time.Time
	Machine           string
	Rows              []*Row
	Memory            []MemResult
	Profile           string
	Problems          []string // things that went wrong: a race, a panic, a changed key schema
	Warnings          []string // things that make the figures less trustworthy
	Notes             []string // what else the run saw (e.g. the spans the collector took)
}

// Row is one scenario on one server, all rounds together.
type Row struct {
	Scenario, Server string
	Baseline         bool
	Target           target
	Note             string
	Skipped          string // why the scenario did not run on this server

	Rounds                       []RoundSummary
	Good, Paced, Wrong, Errors   int
	Statuses                     map[int]int
	WrongSample                  string
	Elapsed                      time.Duration
	CPUServer, CPURedis, CPULoad float64
	CPUMachine                   float64
	RedisCmds, RedisReads        int64
	Exhausted                    bool
	RateLimitHeaders             bool // answers carried RateLimit-Limit

	latencies []time.Duration
	sorted    bool
}

// RoundSummary is one round's figures.
type RoundSummary struct {
	Rate     float64
	P50, P99 time.Duration
}

func (r *Row) add(res roundResult) {
	lat := sortedCopy(res.Latencies)
	r.Rounds = append(r.Rounds, RoundSummary{Rate: float64(res.Good) / res.Elapsed.Seconds(),
		P50: percentile(lat, 0.50), P99: percentile(lat, 0.99)})
	r.Good += res.Good
	r.Paced += res.Paced
	r.Wrong += res.Wrong
	r.Errors += res.Errors
	if r.Statuses == nil {
		r.Statuses = map[int]int{}
	}
	for k, v := range res.Statuses {
		r.Statuses[k] += v
	}
	if r.WrongSample == "" {
		r.WrongSample = res.WrongSample
	}
	r.Elapsed += res.Elapsed
	r.CPUServer += res.CPUServer
	r.CPURedis += res.CPURedis
	r.CPULoad += res.CPULoad
	r.CPUMachine += res.CPUMachine
	r.RedisCmds += res.RedisCmds
	r.RedisReads += res.RedisReads
	r.Exhausted = r.Exhausted || res.Exhausted
	r.latencies = append(r.latencies, res.Latencies...)
	r.sorted = false
}

func sortedCopy(d []time.Duration) []time.Duration {
	c := slices.Clone(d)
	slices.Sort(c)
	return c
}

// Rate is good answers per second over every measuring window.
func (r *Row) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Good) / r.Elapsed.Seconds()
}

// P is the latency quantile q of every good answer of every round.
func (r *Row) P(q float64) time.Duration {
	if !r.sorted {
		slices.Sort(r.latencies)
		r.sorted = true
	}
	return percentile(r.latencies, q)
}

// CPUPerAnswer is server + Redis CPU milliseconds per good answer.
func (r *Row) CPUPerAnswer() float64 {
	return 1000 * (r.CPUServer + r.CPURedis) / float64(max(r.Good, 1))
}

// Foreign is the share of the machine's CPU (all CPUs over the windows) that
// processes other than the server, redis-server and the load generator used.
func (r *Row) Foreign() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	other := r.CPUMachine - r.CPUServer - r.CPURedis - r.CPULoad
	return max(other, 0) / (r.Elapsed.Seconds() * float64(runtime.NumCPU()))
}

// Idle is the share of the machine's CPU (all CPUs over the windows) that no
// process used. In a closed loop it is the sign of time spent waiting rather
// than working: two servers with the same CPU per answer answer at different
// rates when one leaves more of the machine idle.
func (r *Row) Idle() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return max(1-r.CPUMachine/(r.Elapsed.Seconds()*float64(runtime.NumCPU())), 0)
}

// selfRatio is the row's odd rounds' answers over its even rounds' (rounds 1,
// 3, ... over 2, 4, ..., as many of each): for the baseline, an A/A ratio of
// the same code in the same run, which shows the harness's noise.
func (r *Row) selfRatio() (float64, bool) {
	n := len(r.Rounds) / 2
	if n == 0 {
		return 0, false
	}
	var odd, even float64
	for i := range n {
		odd += r.Rounds[2*i].Rate
		even += r.Rounds[2*i+1].Rate
	}
	if even <= 0 {
		return 0, false
	}
	return odd / even, true
}

// Ran reports whether the scenario ran on this server.
func (r *Row) Ran() bool { return r.Skipped == "" }

// Vs returns the row's baseline partner in the same scenario.
func (rep *Report) Vs(r *Row) *Row {
	for _, o := range rep.Rows {
		if o.Scenario == r.Scenario && o.Baseline {
			return o
		}
	}
	return nil
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (nproc), %s, %s/%s, %s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// Markdown renders the report: the main table first, then memory, details, profile.
func (rep *Report) Markdown() string {
	var b strings.Builder
	c := rep.Config
	fmt.Fprintf(&b, "## asyncstatus benchmark, %s\n\n", rep.Started.UTC().Format("2006-01-02 15:04 MST"))
	if c.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`  \n", c.Command)
	}
	fmt.Fprintf(&b, "Machine: %s  \n", rep.Machine)
	fmt.Fprintf(&b, "Load: %d connections, closed loop (one call in flight each), %d round(s) per server and scenario "+
		"alternating asyncstatus and baseline, each %s after %s of warm-up; %d preloaded requests polled; "+
		"run took %s.  \n", c.Concurrency, c.Rounds, c.Duration, c.Warmup, c.Preload, rep.Finished.Sub(rep.Started).Round(time.Second))
	fmt.Fprintf(&b, "GOMAXPROCS (asyncstatus's through runtime.max_procs): asyncstatus %s, baseline %s.\n\n", procsName(c.Procs), procsName(c.BaselineProcs))
	if len(c.Settings) > 0 {
		fmt.Fprintf(&b, "**Not the shipped settings:** every asyncstatus ran with `%s`.\n\n", strings.Join(c.Settings, "`, `"))
	}

	for _, p := range rep.Problems {
		fmt.Fprintf(&b, "**Problem:** %s\n\n", p)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(&b, "**Warning:** %s\n\n", w)
	}

	b.WriteString("### Throughput and latency\n\n")
	b.WriteString("| scenario | server | answers/s | p50 ms | p99 ms | vs baseline (answers/s, p99, CPU) | CPU µs/answer: server + Redis | target |\n")
	b.WriteString("|---|---|---:|---:|---:|---|---:|---|\n")
	for _, r := range rep.Rows {
		if !r.Ran() {
			fmt.Fprintf(&b, "| %s | %s | n/a | | | | | %s |\n", r.Scenario, r.Server, r.Skipped)
			continue
		}
		vs, tgt := "", ""
		if !r.Baseline {
			if bl := rep.Vs(r); bl != nil && bl.Ran() && bl.Rate() > 0 {
				rate := r.Rate() / bl.Rate()
				p99 := float64(r.P(0.99)) / float64(max(bl.P(0.99), 1))
				cpu := r.CPUPerAnswer() / max(bl.CPUPerAnswer(), 1e-9)
				vs = fmt.Sprintf("%.2fx, %.2fx, %.2fx", rate, p99, cpu)
				tgt = r.Target.verdict(rate, p99, cpu)
			}
		}
		good := float64(max(r.Good, 1))
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.2f | %.2f | %s | %.1f + %.1f | %s |\n", r.Scenario, r.Server, r.Rate(),
			ms(r.P(0.50)), ms(r.P(0.99)), vs, 1e6*r.CPUServer/good, 1e6*r.CPURedis/good, tgt)
	}
	b.WriteString("\n")

	if len(rep.Memory) > 0 {
		b.WriteString("### Redis memory per reference request (create, processing, complete)\n\n")
		b.WriteString("| server | used_memory delta / request | MEMORY USAGE sum / request | keys / request | target (<= 900 B) |\n")
		b.WriteString("|---|---:|---:|---:|---|\n")
		for _, m := range rep.Memory {
			tgt := ""
			if m.Server == "asyncstatus" {
				tgt = yesNo(m.Figure() <= 900)
			}
			fmt.Fprintf(&b, "| %s | %.0f B | %.0f B | %.2f | %s |\n", m.Server, m.Figure(),
				m.PerRequest(m.UsageSum()), float64(m.NewKeys)/float64(m.N), tgt)
		}
		fmt.Fprintf(&b, "\nN = %d reference requests per server, each on an emptied Redis with default settings, after %d "+
			"unmeasured ones in another tenant (connections and buffers exist before the first reading). "+
			"The used_memory delta leaves out the change in client buffers (mem_clients_normal), which is connection state; "+
			"it includes the main and expires dictionaries' entries and buckets, which MEMORY USAGE (SAMPLES 0) leaves out.\n\n",
			c.MemN, c.MemWarm)
		b.WriteString("| server | key (tenant {T}) | type, encoding | keys | bytes / key | bytes / request |\n")
		b.WriteString("|---|---|---|---:|---:|---:|\n")
		for _, m := range rep.Memory {
			for _, k := range m.Kinds {
				name := "`" + k.Pattern + "`"
				if k.Extra {
					name += " (not in the figure: " + k.ExtraWhy + ")"
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %d | %.0f | %.0f |\n", m.Server, name, k.What, k.Keys,
					float64(k.Bytes)/float64(max(k.Keys, 1)), m.PerRequest(k.Bytes))
			}
		}
		b.WriteString("\n")
		for _, m := range rep.Memory {
			if m.Record != "" {
				fmt.Fprintf(&b, "- %s record: %s.\n", m.Server, m.Record)
			}
			fmt.Fprintf(&b, "- %s: used_memory %+d B over %d requests, of which client buffers %+d B; %d new keys.\n",
				m.Server, m.UsedDelta, m.N, m.ClientsDelta, m.NewKeys)
		}
		b.WriteString("\n")
	}

	b.WriteString("### Details\n\n")
	b.WriteString("| scenario | server | answers/s by round | p99 ms by round | vs baseline by round pair | Redis commands, socket reads / answer | CPU ms/answer: server, Redis, load generator | CPU used by other processes | machine idle | other answers |\n")
	b.WriteString("|---|---|---|---|---|---:|---|---:|---:|---|\n")
	for _, r := range rep.Rows {
		if !r.Ran() {
			continue
		}
		var rates, p99s []string
		for _, x := range r.Rounds {
			rates = append(rates, fmt.Sprintf("%.0f", x.Rate))
			p99s = append(p99s, fmt.Sprintf("%.2f", ms(x.P99)))
		}
		var pairs []string
		if bl := rep.Vs(r); !r.Baseline && bl != nil && bl.Ran() {
			for i := range min(len(r.Rounds), len(bl.Rounds)) {
				pairs = append(pairs, fmt.Sprintf("%.2fx", r.Rounds[i].Rate/max(bl.Rounds[i].Rate, 1e-9)))
			}
		} else if x, ok := r.selfRatio(); r.Baseline && ok {
			pairs = append(pairs, fmt.Sprintf("itself: %.2fx", x))
		}
		n := float64(max(r.Good, 1))
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.1f, %.2f | %.3f, %.3f, %.3f | %.0f%% | %.0f%% | %s |\n", r.Scenario, r.Server,
			strings.Join(rates, ", "), strings.Join(p99s, ", "), strings.Join(pairs, ", "), float64(r.RedisCmds)/n, float64(r.RedisReads)/n,
			1000*r.CPUServer/n, 1000*r.CPURedis/n, 1000*r.CPULoad/n, 100*r.Foreign(), 100*r.Idle(), r.otherAnswers())
	}
	b.WriteString("\n")
	b.WriteString("- answers/s counts only the answers the scenario expects (poll 200, create 202, complete 200, list 200) that completed inside the measuring windows; p50/p99 are over those answers of all rounds.\n")
	b.WriteString("- CPU is utime + stime from /proc/<pid>/stat of the server process and of redis-server over the windows, divided by the answers; the servers not under test are stopped (SIGSTOP) meanwhile.\n")
	b.WriteString("- CPU used by other processes: the machine's busy time (/proc/stat) less the three processes above, as a share of all CPUs over the windows; above a few per cent, other work disturbed the figures.\n")
	b.WriteString("- machine idle: the share of all CPUs that no process used over the windows (/proc/stat). The load is a closed loop, so CPU left idle is time every call in flight spent waiting (on Redis, on a batch, on a wake-up) rather than work: at equal CPU per answer, the server that leaves more idle answers less.\n")
	b.WriteString("- Redis commands / answer is the INFO total_commands_processed delta per answer; commands run inside a script count too. Socket reads / answer is the total_reads_processed delta per answer: below 1 where calls of several requests arrive in one read (pipelining).\n")
	b.WriteString("- baseline \"itself\": its odd rounds' answers/s over its even rounds' (1, 3 over 2, 4), the same code measured twice in the same alternation: how far a ratio moves with nothing changed but the machine's drift.\n")
	for _, r := range rep.Rows {
		if r.Note != "" && r.Ran() {
			fmt.Fprintf(&b, "- %s: %s.\n", r.Scenario, r.Note)
		}
		if r.Scenario == scenarioPollRL && !r.Baseline && r.Ran() && !r.RateLimitHeaders {
			fmt.Fprintf(&b, "- %s: the answers carried no RateLimit-Limit header: rate limiting is not active in this build of `serve`, so this row measures the same code as %q.\n", r.Scenario, scenarioPoll)
		}
		if r.Exhausted {
			fmt.Fprintf(&b, "- %s on %s: the pool of queued requests ran out before a window ended; that window was shortened.\n", r.Scenario, r.Server)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "- %s.\n", n)
	}
	b.WriteString("\n")

	if rep.Profile != "" {
		b.WriteString("### CPU profile of asyncstatus under the poll load\n\n")
		b.WriteString(rep.Profile)
		b.WriteString("\n")
	}
	return b.String()
}

func (r *Row) otherAnswers() string {
	var parts []string
	if r.Paced > 0 {
		parts = append(parts, fmt.Sprintf("%d x 429 POLLED_TOO_EARLY", r.Paced))
	}
	codes := make([]int, 0, len(r.Statuses))
	for k := range r.Statuses {
		codes = append(codes, k)
	}
	sort.Ints(codes)
	for _, k := range codes {
		parts = append(parts, fmt.Sprintf("%d x %d", r.Statuses[k], k))
	}
	if r.Errors > 0 {
		parts = append(parts, fmt.Sprintf("%d transport errors", r.Errors))
	}
	if len(parts) == 0 {
		return "none"
	}
	s := strings.Join(parts, ", ")
	if r.WrongSample != "" {
		s += " (e.g. " + strings.ReplaceAll(truncate(r.WrongSample, 160), "|", "/") + ")"
	}
	return s
}

func (t target) verdict(rate, p99, cpu float64) string {
	if t.minRate == 0 {
		return ""
	}
	ok := rate >= t.minRate
	s := fmt.Sprintf(">= %.2fx", t.minRate)
	if t.maxP99 > 0 {
		ok = ok && p99 <= t.maxP99
		s += fmt.Sprintf(", p99 <= %.1fx", t.maxP99)
	}
	if t.maxCPU > 0 {
		ok = ok && cpu <= t.maxCPU
		s += fmt.Sprintf(", CPU <= %.2fx", t.maxCPU)
	}
	return s + ": " + yesNo(ok)
}

func yesNo(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// procsName prints a GOMAXPROCS setting of the run; 0 is Go's default.
func procsName(n int) string {
	if n <= 0 {
		return fmt.Sprintf("Go's default (%d)", runtime.NumCPU())
	}
	return strconv.Itoa(n)
}
