// Command bench measures asyncstatus against the baseline (bench/baseline) on a
// redis-server of its own and prints one markdown report: answers/s, p50, p99,
// ratios to the baseline, CPU per answer, and Redis memory per reference request.
// `make bench` runs it with the defaults; -quick is a smoke run of every scenario.
// Run it from the module's directory; see docs/performance.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/asyncstatus/asyncstatus/bench/load"
)

func main() {
	def := load.DefaultConfig()
	quick := flag.Bool("quick", false, "smoke run: every scenario for a fraction of a second, small preload (figures mean nothing)")
	duration := flag.Duration("duration", def.Duration, "measuring window of one round")
	warmup := flag.Duration("warmup", def.Warmup, "unmeasured warm-up before each window")
	rounds := flag.Int("rounds", def.Rounds, "rounds per scenario and server (A B A B ...)")
	conc := flag.Int("concurrency", def.Concurrency, "connections, one call in flight each")
	preload := flag.Int("preload", def.Preload, "requests of the polled tenant")
	memN := flag.Int("mem-n", def.MemN, "reference requests of the memory figure")
	callers := flag.Int("poll-callers", 0, "API keys polling the preloaded tenant (0: enough that no pair repeats)")
	rateLimit := flag.Bool("ratelimit", def.RateLimit, "also run poll with rate limiting on (limits set high)")
	profile := flag.Bool("profile", def.Profile, "perf profile of asyncstatus and redis-server under the poll load (needs perf)")
	procs := flag.Int("procs", def.Procs, "asyncstatus's runtime.max_procs (GOMAXPROCS; 0: Go's default, every CPU)")
	aof := flag.Bool("aof", def.AOF, "also run poll, create and complete with Redis appendonly yes, appendfsync everysec")
	tracing := flag.Bool("tracing", def.Tracing, "also run poll and complete against an asyncstatus with tracing on (sample_ratio 1, a discarding collector in this process), vs tracing off")
	compare := flag.String("compare", "", "git revision to build as a second asyncstatus: poll and complete against it vs this build (tracing off), on a Redis database of its own")
	compareWith := flag.String("compare-with", "", "with -compare: git revision to build as the first server of those scenarios instead of the working tree (e.g. the tracing commit, against its parent)")
	blProcs := flag.Int("baseline-procs", def.BaselineProcs, "the baseline's GOMAXPROCS (0: Go's default, every CPU)")
	ref := flag.String("ref", "", "reference request JSON (default: bench/load/reference-request.json, embedded)")
	quiet := flag.Duration("quiet-wait", 0, "before each round, wait up to this long for other processes to leave the machine idle (shared machines)")
	only := flag.String("only", "", "comma-separated scenario name prefixes to run (e.g. poll,create); default all")
	out := flag.String("out", "bench/out", "directory for latest.md and perf.data (\"\" = none)")
	var settings []string
	flag.Func("set", "an asyncstatus setting other than the shipped one, key.path=value (repeatable; e.g. audit.sink=none): the report says so", func(v string) error {
		settings = append(settings, v)
		return nil
	})
	flag.Parse()

	cfg := def
	if *quick {
		cfg = load.QuickConfig()
	}
	// Flags given explicitly win over the mode's values.
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "duration":
			cfg.Duration = *duration
		case "warmup":
			cfg.Warmup = *warmup
		case "rounds":
			cfg.Rounds = *rounds
		case "concurrency":
			cfg.Concurrency = *conc
		case "preload":
			cfg.Preload = *preload
		case "mem-n":
			cfg.MemN = *memN
		case "ratelimit":
			cfg.RateLimit = *rateLimit
		case "profile":
			cfg.Profile = *profile
		case "procs":
			cfg.Procs = *procs
		case "aof":
			cfg.AOF = *aof
		case "tracing":
			cfg.Tracing = *tracing
		case "baseline-procs":
			cfg.BaselineProcs = *blProcs
		}
	})
	cfg.PollCallers = *callers
	cfg.Settings = settings
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	cfg.QuietWait = *quiet
	cfg.Compare = *compare
	cfg.CompareWith = *compareWith
	cfg.MemWarm = max(cfg.MemN/10, 50)
	cfg.OutDir = *out
	cfg.Log = os.Stderr
	cfg.Command = "go run ./bench/cmd/bench"
	if len(os.Args) > 1 {
		cfg.Command += " " + strings.Join(os.Args[1:], " ")
	}
	if *ref != "" {
		b, err := os.ReadFile(*ref)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		cfg.Reference = b
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := load.Run(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if len(rep.Problems) > 0 {
		os.Exit(1)
	}
}
