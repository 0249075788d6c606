package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestClusterFailover kills (SIGKILL) the master that serves one tenant's slot
// in a Redis Cluster of the test's own, under load, with redis.wait_replicas 1.
// The cluster promotes the master's replica; the service must follow it without
// a restart, and no write it acknowledged may be lost: WAIT 1 made sure the
// replica had each one before the answer. Once the replica is promoted its slot
// has no replica left, so writes there answer 503 (WAIT cannot be satisfied)
// until the old master comes back as the new master's replica; reads recover at
// the promotion. The test logs both 503 windows.
func TestClusterFailover(t *testing.T) {
	const waitTimeout = 500 * time.Millisecond
	// As docs/operations.md recommends: the other masters keep serving their
	// slots while one slot range has no master.
	cl := testenv.StartCluster(t, "--cluster-require-full-coverage", "no")
	victim := cl.MasterOf("{acme}")
	control := ""
	for i := 0; control == ""; i++ {
		if name := fmt.Sprintf("tenant%d", i); cl.MasterOf("{"+name+"}") != victim {
			control = name
		}
	}
	env := baseEnv(opTimeout)
	env["ASYNCSTATUS_REDIS_CLUSTER_ADDRS"] = strings.Join(cl.Addrs(), ",")
	env["ASYNCSTATUS_REDIS_WAIT_REPLICAS"] = "1"
	env["ASYNCSTATUS_REDIS_WAIT_TIMEOUT"] = waitTimeout.String()
	svc := startService(t, env)
	l := &load{c: newClient(svc.base), ledger: &ledger{}, retryPause: 20 * time.Millisecond,
		keys: map[string]string{"acme": newKey(t, env, "acme"), control: newKey(t, env, control)}}
	verifyKeys := map[string]string{"acme": newKey(t, env, "acme"), control: newKey(t, env, control)}

	stopProbe := l.c.probe(100 * time.Millisecond)
	stopLoad := l.run(workers)
	time.Sleep(2 * time.Second)

	cl.Node(victim).Stop()
	killed := time.Now()
	for m := cl.MasterOf("{acme}"); m == victim || m == ""; m = cl.MasterOf("{acme}") {
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("no replica of %s was promoted within 30s", victim)
		}
		time.Sleep(50 * time.Millisecond)
	}
	promoted := time.Now()
	time.Sleep(time.Second)
	cl.Node(victim).Restart() // it rejoins as the replica of its successor
	rejoined := time.Now()
	l.waitWrites(t, rejoined, 30*time.Second)
	time.Sleep(time.Second)
	stopLoad()
	stopProbe()
	svc.alive()
	if err := cl.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	all := l.c.answers()
	byCode := checkAnswers(t, all, opTimeout+waitTimeout+slack)
	of := func(tenant string, kind func(answer) bool) []answer {
		return only(all, func(a answer) bool { return a.tenant == tenant && kind(a) })
	}
	readBack, ok := firstOK(of("acme", isRead), killed)
	if !ok {
		t.Fatal("no read of the failed-over tenant succeeded after the kill")
	}
	writeBack, ok := firstOK(of("acme", isWrite), killed)
	if !ok {
		t.Fatal("no write of the failed-over tenant succeeded after the kill")
	}
	_, _, readErrs := outage(of("acme", isRead), killed, readBack)
	_, _, writeErrs := outage(of("acme", isWrite), killed, writeBack)
	_, _, controlErrs := outage(of(control, func(answer) bool { return true }), killed, writeBack)
	if d := readBack.Sub(promoted); d > 5*time.Second {
		t.Errorf("reads came back %s after the promotion; want < 5s", d)
	}
	// /readyz asks every slot's master: 503 while one is dead, 200 once its
	// replica has taken over (a promoted master without a replica is ready; WAIT
	// is each write's business).
	isReadyz := func(a answer) bool { return a.op == "readyz" }
	readyBack, ok := firstOK(only(all, isReadyz), killed)
	if !ok {
		t.Fatal("/readyz never 200 after the kill")
	}
	if d := readyBack.Sub(promoted); d > 5*time.Second {
		t.Errorf("/readyz came back %s after the promotion; want < 5s", d)
	}
	_, _, readyErrs := outage(only(all, isReadyz), killed, readyBack)
	if readyErrs == 0 {
		t.Error("/readyz never answered 503 while a slot's master was dead")
	}
	if d := writeBack.Sub(rejoined); d > 10*time.Second {
		t.Errorf("writes came back %s after the old master rejoined; want < 10s", d)
	}
	checked, lost := l.ledger.verify(t, l.c, verifyKeys)
	acks, _ := l.ledger.writes()
	t.Logf("cluster failover of %s (wait_replicas 1): promotion %s after the kill; %d answers %v; "+
		"reads of the tenant on it: 503 for %s after the kill (%d answers), back %s after the promotion; "+
		"writes: 503 for %s (%d answers), back %s after the old master rejoined as a replica (%s after the kill); "+
		"/readyz: %d 503s, 200 again %s after the promotion; "+
		"other tenant: %d 503s meanwhile; %d acknowledged writes on %d requests checked, %d lost",
		victim, promoted.Sub(killed).Round(time.Millisecond), len(all), byCode,
		readBack.Sub(killed).Round(time.Millisecond), readErrs, readBack.Sub(promoted).Round(time.Millisecond),
		writeBack.Sub(killed).Round(time.Millisecond), writeErrs, writeBack.Sub(rejoined).Round(time.Millisecond),
		rejoined.Sub(killed).Round(time.Millisecond), readyErrs, readyBack.Sub(promoted).Round(time.Millisecond),
		controlErrs, acks, checked, lost)
	if lost != 0 {
		t.Errorf("%d acknowledged writes lost", lost)
	}
	// With cluster-require-full-coverage no, the other masters keep serving; a
	// busy machine may still make a call miss its deadline now and then (with
	// full coverage required, every tenant gets dozens of CLUSTERDOWN 503s).
	if controlErrs > 5 {
		t.Errorf("%d 503s for a tenant whose master never failed", controlErrs)
	}
	if err := svc.terminate(); err != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0", err)
	}
}

// TestClusterReplicaDown stops (SIGKILL) one replica of a Redis Cluster under
// load. No call of ours goes to a replica (wait_replicas is 0), so nothing may
// change: every answer as usual and /readyz 200 throughout. A /readyz that
// asked every node, replicas included, would flap to 503 on every instance of
// the service for about 6 s (cluster-node-timeout 1 s here; 15 s by default).
func TestClusterReplicaDown(t *testing.T) {
	cl := testenv.StartCluster(t, "--cluster-require-full-coverage", "no")
	// One tenant per master, so that every master carries load.
	tenants := map[string]string{} // master -> tenant
	for i := 0; len(tenants) < 3; i++ {
		if i > 1000 {
			t.Fatalf("found %d masters, want 3", len(tenants))
		}
		name := fmt.Sprintf("tenant%d", i)
		if m := cl.MasterOf("{" + name + "}"); m != "" && tenants[m] == "" {
			tenants[m] = name
		}
	}
	replica := ""
	for _, a := range cl.Addrs() {
		if tenants[a] == "" {
			replica = a
			break
		}
	}
	env := baseEnv(opTimeout)
	env["ASYNCSTATUS_REDIS_CLUSTER_ADDRS"] = strings.Join(cl.Addrs(), ",")
	svc := startService(t, env)
	l := &load{c: newClient(svc.base), ledger: &ledger{}, retryPause: 20 * time.Millisecond, keys: map[string]string{}}
	verifyKeys := map[string]string{}
	for _, tenant := range tenants {
		l.keys[tenant], verifyKeys[tenant] = newKey(t, env, tenant), newKey(t, env, tenant)
	}

	stopProbe := l.c.probe(50 * time.Millisecond)
	stopLoad := l.run(workers)
	time.Sleep(time.Second)
	cl.Node(replica).Stop()
	stopped := time.Now()
	time.Sleep(5 * time.Second)
	stopLoad()
	stopProbe()
	svc.alive()

	all := only(l.c.answers(), func(a answer) bool { return !a.start.Before(stopped) })
	byCode := checkAnswers(t, all, opTimeout+slack)
	ready := only(all, func(a answer) bool { return a.op == "readyz" })
	if len(ready) < 20 {
		t.Fatalf("only %d /readyz answers in 5 s", len(ready))
	}
	readyOK := 0
	for _, a := range ready {
		if a.code == 200 {
			readyOK++
		} else {
			t.Errorf("/readyz with a replica down: %s", a)
		}
	}
	if n := byCode[503]; n != 0 {
		t.Errorf("%d answers 503 with only a replica down", n)
	}
	checked, lost := l.ledger.verify(t, l.c, verifyKeys)
	t.Logf("replica %s stopped: %d answers %v in the 5 s after; /readyz 200 in %d of %d; %d requests checked, %d lost",
		replica, len(all), byCode, readyOK, len(ready), checked, lost)
	if lost != 0 {
		t.Errorf("%d acknowledged writes lost", lost)
	}
}
