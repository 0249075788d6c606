package faults

import (
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

const (
	// opTimeout is redis.op_timeout in these tests.
	opTimeout = 300 * time.Millisecond
	// slack is what an answer may take beyond its Redis deadlines: a request can
	// meet two of them (a create's script, then registering the tenant; a
	// delete's read, then its script), and the machine running the tests is busy
	// (CI at a load of 20 on 2 cores saw 2 s). Redis stays frozen or dead for
	// longer than opTimeout+slack, so an answer that waited for it still fails.
	slack = 2500 * time.Millisecond
	// workers making requests at once.
	workers = 8
)

// standalone starts the service on its own redis-server (args for the server)
// and returns it with a load driver for tenants acme and globex, and keys to
// verify with.
func standalone(t *testing.T, args ...string) (*testenv.Process, *service, *load, map[string]string) {
	t.Helper()
	r := testenv.StartRedisProcess(t, args...)
	env := baseEnv(opTimeout)
	env["ASYNCSTATUS_REDIS_URL"] = "redis://" + r.Addr() + "/0"
	svc := startService(t, env)
	l := &load{c: newClient(svc.base), ledger: &ledger{}, retryPause: 20 * time.Millisecond,
		keys: map[string]string{"acme": newKey(t, env, "acme"), "globex": newKey(t, env, "globex")}}
	verifyKeys := map[string]string{"acme": newKey(t, env, "acme"), "globex": newKey(t, env, "globex")}
	return r, svc, l, verifyKeys
}

// TestRedisHung freezes Redis with SIGSTOP under load: every answer meanwhile is
// a 503 problem within about the op timeout, /readyz is 503 and /healthz 200;
// after SIGCONT normal answers resume within seconds, and no acknowledged write
// is lost.
func TestRedisHung(t *testing.T) {
	r, svc, l, verifyKeys := standalone(t)
	stopProbe := l.c.probe(100 * time.Millisecond)
	stopLoad := l.run(workers)

	time.Sleep(1500 * time.Millisecond)
	r.Pause()
	// SIGSTOP takes effect asynchronously: a command already on its way may
	// still be served in the first moments.
	paused := time.Now().Add(20 * time.Millisecond)
	time.Sleep(5 * time.Second)
	resumed := time.Now() // before SIGCONT: anything answered earlier was answered while frozen
	r.Resume()
	time.Sleep(3 * time.Second)
	stopLoad()
	stopProbe()
	svc.alive()

	all := l.c.answers()
	byCode := checkAnswers(t, all, opTimeout+slack)
	// Sent while Redis was frozen (and answered before it thawed): 503, nothing else.
	during := wantOnly503(t, all, paused, resumed, "while Redis is hung")
	if len(only(during, func(a answer) bool { return a.op == "readyz" })) == 0 {
		t.Error("no /readyz answer while Redis was hung")
	}
	if len(only(during, isWrite)) == 0 || len(only(during, isRead)) == 0 {
		t.Errorf("too little load while Redis was hung: %d answers", len(during))
	}
	back, ready := wantRecovered(t, all, resumed, "SIGCONT")
	from, to, n := outage(only(all, func(a answer) bool { return a.op != "readyz" }), paused, back)
	checked, lost := l.ledger.verify(t, l.c, verifyKeys)
	acks, _ := l.ledger.writes()
	t.Logf("SIGSTOP for %s: %d answers %v; 503 window %s (%d answers, first at +%s); API back %s after SIGCONT, /readyz %s; "+
		"%d acknowledged writes on %d requests checked, %d lost",
		resumed.Sub(paused).Round(time.Millisecond), len(all), byCode, to.Sub(from).Round(time.Millisecond), n,
		from.Sub(paused).Round(time.Millisecond), back.Sub(resumed).Round(time.Millisecond), ready.Sub(resumed).Round(time.Millisecond),
		acks, checked, lost)
	if lost != 0 {
		t.Errorf("%d acknowledged writes lost", lost)
	}
	quietBackground(t, svc)
}

// TestRedisKilled kills Redis (SIGKILL) under load and restarts it from its
// append-only file (appendfsync always): every write acknowledged before the
// kill is still there, at least in the state acknowledged. The restarted Redis
// has an empty script cache (NOSCRIPT), which the service must get over by
// itself. While Redis is away and nobody calls, the service stays idle: no busy
// loop of reconnects or sweeps.
func TestRedisKilled(t *testing.T) {
	r, svc, l, verifyKeys := standalone(t, "--appendonly", "yes", "--appendfsync", "always")
	stopProbe := l.c.probe(100 * time.Millisecond)
	stopLoad := l.run(workers)

	time.Sleep(1500 * time.Millisecond)
	r.Stop()
	killed := time.Now()
	time.Sleep(1500 * time.Millisecond)
	stopLoad()
	stopProbe()

	// Nobody calls now; the sweeper still ticks every 200ms against a dead Redis,
	// failing each time: counted, and no faster than its interval.
	const runs, errs = "asyncstatus_sweeper_runs_total", "asyncstatus_sweeper_errors_total"
	cpu0, haveCPU := svc.cpuTime()
	m0 := svc.metrics(runs, errs)
	time.Sleep(2 * time.Second)
	cpu1, _ := svc.cpuTime()
	m1 := svc.metrics(runs, errs)
	_, haveSweeper := m0[errs]
	runs0, runs1, errs0, errs1 := m0[runs], m1[runs], m0[errs], m1[errs]
	if haveCPU && cpu1-cpu0 > 500*time.Millisecond {
		t.Errorf("the idle service used %s of CPU in 2s while Redis was down: a busy loop?", cpu1-cpu0)
	}
	if haveSweeper && (errs1-errs0 < 1 || runs1-runs0 > 15) {
		t.Errorf("sweeper while Redis was down for 2s: %v ticks, %v failed; want a few ticks (interval 200ms), all failed", runs1-runs0, errs1-errs0)
	}

	stopProbe = l.c.probe(100 * time.Millisecond)
	stopLoad = l.run(workers)
	time.Sleep(500 * time.Millisecond)
	restarting := time.Now()
	r.Restart()
	restarted := time.Now() // it answers PING
	time.Sleep(3 * time.Second)
	stopLoad()
	stopProbe()
	svc.alive()

	all := l.c.answers()
	byCode := checkAnswers(t, all, opTimeout+slack)
	during := wantOnly503(t, all, killed, restarting, "while Redis is down")
	if len(only(during, isWrite)) == 0 || len(only(during, isRead)) == 0 {
		t.Errorf("too little load while Redis was down: %d answers", len(during))
	}
	back, ready := wantRecovered(t, all, restarted, "the restart")
	checked, lost := l.ledger.verify(t, l.c, verifyKeys)
	acks, _ := l.ledger.writes()
	t.Logf("SIGKILL, restart after %s from AOF (appendfsync always): %d answers %v; API back %s after the restart, /readyz %s; "+
		"idle while down: %s CPU in 2s, %v sweeper ticks (%v failed); %d acknowledged writes on %d requests checked, %d lost",
		restarted.Sub(killed).Round(time.Millisecond), len(all), byCode, back.Sub(restarted).Round(time.Millisecond),
		ready.Sub(restarted).Round(time.Millisecond), cpu1-cpu0, runs1-runs0, errs1-errs0, acks, checked, lost)
	if lost != 0 {
		t.Errorf("%d acknowledged writes lost", lost)
	}
	quietBackground(t, svc)
}

// quietBackground checks that the sweeper and the rate limiter reported the
// outage without flooding the log (each logs at most once a minute, and every
// test here is shorter than that) and that the service survived it.
func quietBackground(t *testing.T, svc *service) {
	t.Helper()
	svc.alive()
	log := svc.Log()
	sweeps := countLines(log, "sweeper tick failed")
	limits := countLines(log, "ratelimit: store failed")
	if sweeps < 1 || sweeps > 2 || limits > 2 {
		t.Errorf("log lines during the outage: %d from the sweeper (want 1 or 2), %d from the rate limiter (want at most 2)", sweeps, limits)
	}
	if err := svc.terminate(); err != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0", err)
	}
}

// wantRecovered fails t unless the API (a read or a write) and /readyz each
// answered 2xx again within 5 s of since, when Redis came back after what; it
// returns when each first did.
func wantRecovered(t *testing.T, all []answer, since time.Time, what string) (back, ready time.Time) {
	t.Helper()
	var ok bool
	back, ok = firstOK(only(all, func(a answer) bool { return isWrite(a) || isRead(a) }), since)
	if !ok {
		t.Fatalf("no 2xx after %s", what)
	}
	ready, ok = firstOK(only(all, func(a answer) bool { return a.op == "readyz" }), since)
	if !ok {
		t.Fatalf("/readyz never 200 again after %s", what)
	}
	if back.Sub(since) > 5*time.Second || ready.Sub(since) > 5*time.Second {
		t.Errorf("recovery after %s took %s (API), %s (/readyz); want < 5s", what, back.Sub(since), ready.Sub(since))
	}
	return back, ready
}
