package store_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/bench/yardstick"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// BenchmarkRedisCost measures what each step of the reference request's life costs
// Redis itself, for asyncstatus and for the yardstick's equivalent, in the same
// run on a private redis-server. Client and network costs are left out: they are
// the same for both. The ratio is the figure to compare.
//
// By default the meter is INFO commandstats: microseconds inside the script, or
// inside HGETALL for the yardstick's poll; they drift with the machine:
//
//	go test -run XXX -bench BenchmarkRedisCost -benchtime 5000x ./internal/store/
//
// With ASYNCSTATUS_BENCH_METER=callgrind the server runs under valgrind's
// callgrind and the meter is the instructions redis-server executed (in user
// space, its event loop and reply writing included), the same from run to run
// whatever else the machine does, so that a change of a few per cent to a
// script shows (about 50 times slower; needs valgrind):
//
//	ASYNCSTATUS_BENCH_METER=callgrind go test -run XXX -bench BenchmarkRedisCost -benchtime 2000x ./internal/store/
//
// With ASYNCSTATUS_BENCH_AUDIT=1 the store records audit entries (audit.sink
// log or file, the default bound), and a last step, Drain, measures what the
// drainer's reads, acknowledgements and deletes of those entries cost Redis per
// entry (callgrind only: commandstats meters one command).
//
// With ASYNCSTATUS_BENCH_RATELIMIT=1 the scripts count the rate limits of
// every call (store.Options.RateLimits, a credential on each call), and a last
// step, Limiter, measures what counting one call in a separate round trip
// cost Redis instead (internal/ratelimit, ulule's two scripts: how writes were
// counted before the scripts counted them).
func BenchmarkRedisCost(b *testing.B) {
	in, prog, done := loadReference(b)
	var rdb *redis.Client
	var spent func(cmd string) float64 // what Redis spent since the last call (in cmd, for commandstats)
	unit := "redis-µs/op"
	if os.Getenv("ASYNCSTATUS_BENCH_METER") == "callgrind" {
		rdb, spent = callgrindRedis(b)
		unit = "redis-instr/op"
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: testenv.StartRedisProcess(b).Addr()})
		spent = commandstatsMeter(b, rdb)
	}
	b.Cleanup(func() { rdb.Close() })
	auditOn := os.Getenv("ASYNCSTATUS_BENCH_AUDIT") == "1"
	o := store.Options{Prefix: "as", Retention: 720 * time.Hour}
	if auditOn {
		o.AuditBacklog = 100000
	}
	rateOn := os.Getenv("ASYNCSTATUS_BENCH_RATELIMIT") == "1"
	cred := "" // the rate-limit credential of every call: none, not counted
	if rateOn {
		lots := ratelimit.Rate{Limit: 1_000_000_000, Period: time.Hour}
		o.RateLimits = &ratelimit.Rates{Read: lots, Write: lots, Admin: lots, Tenant: lots}
		cred = "key_b"
	}
	s, err := store.New(rdb, o)
	if err != nil {
		b.Fatal(err)
	}
	for _, sc := range []*redis.Script{yardstick.CreateScript, yardstick.ProcessingScript, yardstick.CompleteScript} {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
	}
	// The lifecycle moves through the sub-benchmarks in order. The testing package
	// runs each sub-benchmark more than once (b.N = 1, then the -benchtime count,
	// -count times): every Create run adds one request more than asked, and each
	// later step starts where its previous run stopped, so that every step meets
	// fresh requests.
	var ids []string
	report := func(b *testing.B, n int, ours, theirs float64) {
		b.ReportMetric(ours/float64(n), unit)
		b.ReportMetric(theirs/float64(n), "baseline-"+unit)
		b.ReportMetric(ours/theirs, "x-baseline")
	}
	bl := func(i int) string { return "bl:{bench}:r:" + strconv.Itoa(i) }
	b.Run("Create", func(b *testing.B) {
		n := b.N + 1
		first := len(ids)
		ids = append(ids, make([]string, n)...)
		spent("evalsha")
		for i := first; i < first+n; i++ {
			r, _, err := s.Create(ctx, domain.CreateParams{
				Call:    domain.Call{Tenant: "bench", By: "key_b", Credential: cred},
				Input:   in,
				IdemKey: domain.IdempotencyKey(fmt.Sprint("k", i)),
			})
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = r.ID
		}
		ours := spent("evalsha")
		for i := first; i < first+n; i++ {
			yardstick.CreateScript.Run(ctx, rdb, []string{bl(i), "bl:{bench}:ix"}, strconv.Itoa(i), "1764410400000",
				"statement.export", string(in.Context), "bench")
		}
		report(b, n, ours, spent("evalsha"))
	})
	step := func(name string, ours func(id string) error, theirs func(i int) error, theirCmd string) {
		off := 0
		b.Run(name, func(b *testing.B) {
			if len(ids) < off+b.N {
				b.Fatalf("%s needs %d requests, Create made %d", name, off+b.N, len(ids))
			}
			spent("evalsha")
			spent(theirCmd)
			for _, id := range ids[off : off+b.N] {
				if err := ours(id); err != nil {
					b.Fatal(err)
				}
			}
			o := spent("evalsha")
			for i := off; i < off+b.N; i++ {
				if err := theirs(i); err != nil {
					b.Fatal(err)
				}
			}
			off += b.N
			report(b, b.N, o, spent(theirCmd))
		})
	}
	step("Processing", func(id string) error {
		_, err := s.MarkProcessing(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "bench", By: "key_b", Credential: cred}, ID: id}, prog)
		return err
	}, func(i int) error {
		return yardstick.ProcessingScript.Run(ctx, rdb, []string{bl(i)}, "1764410401000", string(prog.Progress)).Err()
	}, "evalsha")
	caller := 0
	step("Poll", func(id string) error { // every poll a caller's first: paced, pacing state written
		caller++
		c := "key_" + strconv.Itoa(caller)
		p := domain.PollParams{Call: domain.Call{Tenant: "bench"}, ID: id, Caller: c}
		if rateOn {
			p.Credential = c
		}
		_, err := s.Poll(ctx, p)
		return err
	}, func(i int) error { return rdb.HGetAll(ctx, bl(i)).Err() }, "hgetall")
	step("Complete", func(id string) error {
		_, err := s.Complete(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "bench", By: "key_b", Credential: cred}, ID: id}, done)
		return err
	}, func(i int) error {
		return yardstick.CompleteScript.Run(ctx, rdb, []string{bl(i)}, "1764410404512", "answer", string(done.Result)).Err()
	}, "evalsha")
	if rateOn {
		b.Run("Limiter", func(b *testing.B) {
			l, err := ratelimit.New(ctx, ratelimit.Config{Enabled: true, Read: "1000000000-H", Write: "1000000000-H",
				Admin: "1000000000-H", Tenant: "1000000000-H", Timeout: time.Minute, Prefix: "as"}, rdb, nil)
			if err != nil {
				b.Fatal(err)
			}
			spent("evalsha")
			for range b.N {
				if _, err := l.Count(ctx, "bench", "key_l", ratelimit.ScopeWrite); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(spent("evalsha")/float64(b.N), unit)
		})
	}
	if auditOn && unit == "redis-instr/op" {
		b.Run("Drain", func(b *testing.B) {
			if b.N == 1 { // the testing package's probe run: leave the entries to the measured one
				return
			}
			spent("")
			n := 0
			for {
				evs, err := s.ReadAudit(ctx, "bench", []domain.ShardName{"bench"}, 1000, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if len(evs) == 0 {
					break
				}
				if err := s.AckAudit(ctx, evs); err != nil {
					b.Fatal(err)
				}
				n += len(evs)
			}
			if n > 0 {
				b.ReportMetric(spent("")/float64(n), "redis-instr/entry")
			}
		})
	}
}

// commandstatsMeter returns the microseconds Redis spent in command cmd since
// the last call (INFO commandstats, then CONFIG RESETSTAT).
func commandstatsMeter(b *testing.B, rdb *redis.Client) func(cmd string) float64 {
	return func(cmd string) float64 {
		v, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		var usec float64
		for _, l := range strings.Split(v, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "cmdstat_"+cmd+":"); ok {
				for _, kv := range strings.Split(rest, ",") {
					if u, ok := strings.CutPrefix(kv, "usec="); ok {
						usec, _ = strconv.ParseFloat(u, 64)
					}
				}
			}
		}
		rdb.ConfigResetStat(ctx)
		return usec
	}
}

// callgrindRedis starts a private redis-server under callgrind and returns a
// client and a meter: the instructions the server executed since the last call
// (callgrind_control dumps the counts collected since the previous dump).
func callgrindRedis(b *testing.B) (*redis.Client, func(string) float64) {
	for _, tool := range []string{"valgrind", "callgrind_control"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("ASYNCSTATUS_BENCH_METER=callgrind needs %s (apt-get install valgrind): %v", tool, err)
		}
	}
	// ASYNCSTATUS_BENCH_CALLGRIND_DIR keeps the dumps there (one per step, in
	// order), for callgrind_annotate --inclusive=yes: what each Redis command
	// of a script costs (docs/performance.md, Where a write's CPU goes).
	dir := os.Getenv("ASYNCSTATUS_BENCH_CALLGRIND_DIR")
	if dir == "" {
		dir = b.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, "callgrind.out")
	// Only what a call costs is counted: reading and running commands
	// (readQueryFromClient) and writing their replies
	// (handleClientsWithPendingWritesUsingThreads). serverCron and the rest of
	// the event loop run by the clock, so under valgrind's slowness their share
	// of a step depended on how long the step took: counted, they moved a
	// create's figure by 3% between two runs of the same tree; left out, by
	// under 0.5%.
	p := testenv.StartRedisUnder(b, []string{"valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
		"--toggle-collect=readQueryFromClient", "--toggle-collect=handleClientsWithPendingWritesUsingThreads"})
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	pid := strconv.Itoa(p.PID())
	parts := 0
	return rdb, func(string) float64 {
		if msg, err := exec.Command("callgrind_control", "-d", pid).CombinedOutput(); err != nil {
			b.Fatalf("callgrind_control -d: %v\n%s", err, msg)
		}
		parts++
		// dump N goes to <out>.<N>; its "summary:" line is the instructions since dump N-1
		f := out + "." + strconv.Itoa(parts)
		var data []byte
		for try := 0; try < 100; try++ { // the dump is written by the server asynchronously
			if d, err := os.ReadFile(f); err == nil && bytes.Contains(d, []byte("\nsummary: ")) {
				data = d
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "summary: "); ok {
				n, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
				return n
			}
		}
		b.Fatalf("no callgrind dump %s", f)
		return 0
	}
}
