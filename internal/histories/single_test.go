package histories

import (
	"context"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestHistorySingleRedis records a history of three serves on one
// redis-server while a nemesis kills (SIGKILL) and restarts a serve, freezes
// Redis (SIGSTOP/SIGCONT), and cuts one serve off from Redis through a proxy
// (blackhole, delay, reset). Every check must pass: no fault of these may
// lose an acknowledged write, change a terminal state, let two terminal
// transitions win, or make a waiter miss a change for good.
func TestHistorySingleRedis(t *testing.T) {
	began := time.Now()
	r := testenv.StartRedisProcess(t)
	px := startProxy(t, r.Addr())
	env := baseEnv()
	env["ASYNCSTATUS_REDIS_URL"] = "redis://" + r.Addr() + "/0"
	w := newWorld(t, 3, env, func(i int, e map[string]string) {
		if i == 0 {
			e["ASYNCSTATUS_REDIS_URL"] = "redis://" + px.addr() + "/0"
		}
	})
	d, workers := size()
	w.run(d, workers, func(ctx context.Context) {
		steps := []func(){
			func() { w.killServe(1, time.Second) },
			func() {
				from := time.Now()
				r.Pause()
				sleep(ctx, 1500*time.Millisecond)
				r.Resume()
				w.rec.fault(Window{Serve: -1, From: from, To: time.Now().Add(time.Second), What: "redis-sigstop"})
			},
			func() { w.partition(ctx, px, "blackhole", 0, 2*time.Second) },
			func() { w.partition(ctx, px, "delay", 200*time.Millisecond, 2*time.Second) },
			func() {
				from := time.Now()
				px.reset()
				w.rec.fault(Window{Serve: 0, From: from, To: time.Now().Add(time.Second), What: "partition-reset"})
			},
		}
		gap := min(d/time.Duration(3*len(steps)), 4*time.Second)
		for i := 0; ctx.Err() == nil; i++ {
			if !sleep(ctx, gap) {
				return
			}
			steps[i%len(steps)]()
		}
	})
	px.set("", 0)
	w.quiesce()
	v := w.check("single")
	v.log(t, "single redis, 3 serves", time.Since(began))
	requireClean(t, v)
	requireExercised(t, w, v, "kill-serve", "redis-sigstop", "partition-blackhole", "partition-delay", "partition-reset")
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// killServe kills serve i with SIGKILL and restarts it after down.
func (w *world) killServe(i int, down time.Duration) {
	from := time.Now()
	w.serves[i].Kill()
	time.Sleep(down)
	w.serves[i].Restart()
	w.rec.fault(Window{Serve: i, From: from, To: time.Now().Add(time.Second), What: "kill-serve"})
}

// partition applies a proxy fault for d (or until ctx ends).
func (w *world) partition(ctx context.Context, px *proxy, mode string, delay, d time.Duration) {
	from := time.Now()
	px.set(mode, delay)
	sleep(ctx, d)
	px.set("", 0)
	w.rec.fault(Window{Serve: 0, From: from, To: time.Now().Add(time.Second), What: "partition-" + mode})
}

// requireClean fails the test on every anomaly.
func requireClean(t *testing.T, v verdict) {
	t.Helper()
	for k, n := range v.byKind() {
		t.Errorf("%d anomalies of kind %s (listed above)", n, k)
	}
}

// requireExercised fails the test when the history is too thin to prove
// anything: few operations, no race between terminal transitions, no
// waiter that had to be woken, a fault kind that never happened.
func requireExercised(t *testing.T, w *world, v verdict, faults ...string) {
	t.Helper()
	ops, _, _, _ := w.rec.snapshot()
	conflicts, winners, waits := 0, 0, 0
	for _, op := range ops {
		if terminalOf[op.Kind] != "" {
			switch op.Outcome {
			case Terminal:
				conflicts++
			case OK:
				winners++
			}
		}
		if op.Kind == LongPoll && op.Outcome == OK {
			waits++
		}
	}
	if v.requests < 50 || winners < 20 || conflicts < 10 {
		t.Errorf("too thin a history: %d requests, %d terminal winners, %d losing terminal transitions", v.requests, winners, conflicts)
	}
	if v.wake.Checked < 10 || waits < 10 {
		t.Errorf("too few wake-ups checked: %d (%d long polls answered a change)", v.wake.Checked, waits)
	}
	if v.walks < 2 {
		t.Errorf("only %d complete list walks during the load", v.walks)
	}
	for _, f := range faults {
		if v.faults[f] == 0 {
			t.Errorf("fault %s was never injected", f)
		}
	}
}
