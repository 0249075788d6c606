package load

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// TestQuickRun runs the whole harness in quick mode: it builds both servers, starts
// a redis-server, preloads, measures every scenario on both servers and the memory
// per request, and prints the report. It checks that the harness works (every
// scenario got answers, all of them the expected ones, the table was printed), never
// how fast anything was.
func TestQuickRun(t *testing.T) {
	cfg := QuickConfig()
	if raceEnabled {
		// Race-built servers answer a few thousand calls a second: a smaller preload
		// still lasts the poll-token walk of a quick round, in a third of the time.
		cfg.BuildFlags = []string{"-race"}
		cfg.Preload = 3_000
	}
	cfg.Log = logWriter{t}
	// A cold build cache can take minutes to compile the servers (shared with the
	// rest of `go test ./...`); the run itself takes about 20 s.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	t0 := time.Now()
	rep, err := Run(ctx, cfg, &out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("quick run took %s; report:\n%s", time.Since(t0).Round(time.Second), out.String())

	for _, p := range rep.Problems {
		t.Errorf("problem: %s", p)
	}
	md := out.String()
	for _, want := range []string{"| scenario | server | answers/s | p50 ms | p99 ms |", "### Redis memory per reference request",
		"| " + scenarioPoll + " | asyncstatus |", "| " + scenarioPoll + " | baseline |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}

	scenarios := map[string]bool{}
	for _, r := range rep.Rows {
		scenarios[r.Scenario] = true
		if !r.Ran() {
			// Only a route the server does not have yet may keep a scenario from running.
			if !strings.Contains(r.Skipped, "no such route") {
				t.Errorf("%s on %s did not run: %s", r.Scenario, r.Server, r.Skipped)
			}
			t.Logf("%s on %s did not run: %s", r.Scenario, r.Server, r.Skipped)
			continue
		}
		if r.Good == 0 {
			t.Errorf("%s on %s: no expected answer", r.Scenario, r.Server)
		}
		if r.Wrong > 0 || r.Errors > 0 {
			t.Errorf("%s on %s: %d unexpected answers and %d transport errors: %s", r.Scenario, r.Server, r.Wrong, r.Errors, r.otherAnswers())
		}
		if r.Paced > 0 && r.Scenario != scenarioPollToken {
			// Only the poll-token walk can come back to a request soon (quick mode
			// preloads few); every other poll uses a fresh (caller, request) pair.
			t.Errorf("%s on %s: %d polls were paced (429 POLLED_TOO_EARLY)", r.Scenario, r.Server, r.Paced)
		}
		if len(r.Rounds) != cfg.Rounds {
			t.Errorf("%s on %s: %d rounds, want %d", r.Scenario, r.Server, len(r.Rounds), cfg.Rounds)
		}
	}
	for _, s := range []string{scenarioPoll, scenarioPollToken, scenarioPollRL, scenarioCreate, scenarioComplete, scenarioList,
		scenarioTracePoll, scenarioTraceComplete} {
		if !scenarios[s] {
			t.Errorf("no row for scenario %q", s)
		}
	}
	// Tracing on exported its spans to the harness's collector, and lost none.
	for _, want := range []string{"| " + scenarioTracePoll + " | asyncstatus (tracing on) |", "| " + scenarioTracePoll + " | asyncstatus |",
		"the collector took ", " and 0 dropped (/metrics)"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(md, "the collector took 0 exports") || strings.Contains(md, "counted n/a spans") ||
		strings.Contains(md, "counted 0 spans") {
		t.Error("tracing on exported no span to the collector")
	}

	if len(rep.Memory) != 2 {
		t.Fatalf("%d memory results, want asyncstatus and baseline", len(rep.Memory))
	}
	for _, m := range rep.Memory {
		if m.Figure() <= 0 || m.UsageSum() <= 0 || m.NewKeys < int64(m.N) {
			t.Errorf("memory of %s: %.0f B/request, MEMORY USAGE sum %d, %d new keys for %d requests",
				m.Server, m.Figure(), m.UsageSum(), m.NewKeys, m.N)
		}
		if !strings.Contains(m.Record, "fields") {
			t.Errorf("memory of %s: no record found among the new keys", m.Server)
		}
	}
}

func TestParseReference(t *testing.T) {
	canonical, err := os.ReadFile("../../testdata/reference-request.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(canonical, referenceJSON) {
		t.Error("bench/load/reference-request.json differs from testdata/reference-request.json: copy the latter over the former")
	}
	ref, err := ParseReference(referenceJSON)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"create": ref.Create, "processing": ref.Processing, "complete": ref.Complete} {
		if !json.Valid(b) || bytes.ContainsRune(b, '\n') {
			t.Errorf("%s body is not compact JSON: %q", name, b)
		}
	}
	if !bytes.Contains(ref.Create, []byte(`"type":"statement.export"`)) {
		t.Errorf("create body not compacted: %s", ref.Create)
	}
	if _, err := ParseReference([]byte(`{"create":{}}`)); err == nil {
		t.Error("a reference without processing and complete bodies was accepted")
	}
}

func TestKeyPattern(t *testing.T) {
	for in, want := range map[string]string{
		"as:{benchmem}:r:01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a": "as:{T}:r:<id>",
		"as:{benchw}:ik:0123456789abcdef0123456789abcdef":      "as:{T}:ik:<digest>",
		"as:{benchmem}:ix:s:statement.export":                  "as:{T}:ix:s:statement.export",
		"as:{benchmem}:rb:1795983090000":                       "as:{T}:rb:<ms>",
		"as:key:key_abcdefghijklmnop":                          "as:key:<key-id>",
		"bl:{bench}:ix":                                        "bl:{T}:ix",
	} {
		if got := keyPattern(in); got != want {
			t.Errorf("keyPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for q, want := range map[float64]time.Duration{0.50: 50, 0.99: 99, 1: 100, 0: 1} {
		if got := percentile(d, q); got != want {
			t.Errorf("percentile(1..100, %v) = %d, want %d", q, got, want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

// logWriter sends the harness's progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestSelfRatio(t *testing.T) {
	rounds := func(rates ...float64) *Row {
		r := &Row{}
		for _, x := range rates {
			r.Rounds = append(r.Rounds, RoundSummary{Rate: x})
		}
		return r
	}
	for _, tc := range []struct {
		r    *Row
		want float64
		ok   bool
	}{
		{rounds(100, 200, 300, 400), (100 + 300) / (200 + 400.0), true},
		{rounds(100, 50, 999), 2, true}, // an odd last round has no partner
		{rounds(100), 0, false},
		{rounds(100, 0), 0, false},
	} {
		got, ok := tc.r.selfRatio()
		if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("selfRatio(%v) = %v, %v; want %v, %v", tc.r.Rounds, got, ok, tc.want, tc.ok)
		}
	}
}

// TestSettingsEnv: -set key.path=value becomes the variable serve reads,
// and a setting that is not one is refused.
func TestSettingsEnv(t *testing.T) {
	got, err := settingsEnv([]string{"audit.sink=none", "runtime.max_procs=1", "x=a=b"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ASYNCSTATUS_AUDIT_SINK=none", "ASYNCSTATUS_RUNTIME_MAX_PROCS=1", "ASYNCSTATUS_X=a=b"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("settingsEnv = %q, want %q", got, want)
	}
	for _, bad := range []string{"audit.sink", "=none", "AUDIT.SINK=none", "audit sink=none"} {
		if _, err := settingsEnv([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
