package faults

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestSentinelFailover kills (SIGKILL) a Sentinel-managed master under load
// with redis.wait_replicas 1. Three sentinels promote its replica; the service
// follows the new master without a restart, and no write it acknowledged is
// lost (WAIT 1 made sure the replica had each one). As on the cluster, writes
// answer 503 from the kill until the promoted master has a replica again: the
// old master, restarted as its replica once every sentinel names it.
func TestSentinelFailover(t *testing.T) {
	const waitTimeout = 500 * time.Millisecond
	master := testenv.StartRedisProcess(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(master.Addr())
	replica := testenv.StartRedisProcess(t, "--replicaof", host, port, "--repl-diskless-sync-delay", "0")
	waitOnline(t, master.Addr())
	sentinels := testenv.StartSentinels(t, "main", master.Addr(), 3)

	env := baseEnv(opTimeout)
	env["ASYNCSTATUS_REDIS_SENTINEL_MASTER"] = "main"
	env["ASYNCSTATUS_REDIS_SENTINEL_ADDRS"] = strings.Join(sentinels.Addrs(), ",")
	env["ASYNCSTATUS_REDIS_WAIT_REPLICAS"] = "1"
	env["ASYNCSTATUS_REDIS_WAIT_TIMEOUT"] = waitTimeout.String()
	svc := startService(t, env)
	l := &load{c: newClient(svc.base), ledger: &ledger{}, retryPause: 20 * time.Millisecond,
		keys: map[string]string{"acme": newKey(t, env, "acme"), "globex": newKey(t, env, "globex")}}
	verifyKeys := map[string]string{"acme": newKey(t, env, "acme"), "globex": newKey(t, env, "globex")}

	stopProbe := l.c.probe(100 * time.Millisecond)
	stopLoad := l.run(workers)
	time.Sleep(2 * time.Second)

	master.Stop()
	killed := time.Now()
	for sentinels.Master() != replica.Addr() {
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("the sentinels did not promote %s within 30s", replica.Addr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	promoted := time.Now()
	if err := sentinels.WaitMaster(replica.Addr(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	// Back as a replica of the new master, as a master without persistence
	// must come back (testenv.RestartAsReplicaOf says why).
	master.RestartAsReplicaOf(replica.Addr())
	rejoined := time.Now()
	l.waitWrites(t, rejoined, 30*time.Second)
	time.Sleep(time.Second)
	stopLoad()
	stopProbe()
	svc.alive()

	all := l.c.answers()
	byCode := checkAnswers(t, all, opTimeout+waitTimeout+slack)
	readBack, ok := firstOK(only(all, isRead), killed)
	if !ok {
		t.Fatal("no read succeeded after the kill")
	}
	writeBack, ok := firstOK(only(all, isWrite), killed)
	if !ok {
		t.Fatal("no write succeeded after the kill")
	}
	_, _, readErrs := outage(only(all, isRead), killed, readBack)
	_, _, writeErrs := outage(only(all, isWrite), killed, writeBack)
	// The windows measured must hold answers, or they prove nothing.
	if readErrs == 0 || writeErrs == 0 {
		t.Errorf("no 503 between the kill and the recovery (%d reads, %d writes): the load did not reach the dead master", readErrs, writeErrs)
	}
	if readBack.Before(promoted.Add(-time.Second)) {
		t.Errorf("a read succeeded %s before the promotion, with the only master dead", promoted.Sub(readBack))
	}
	if d := readBack.Sub(promoted); d > 5*time.Second {
		t.Errorf("reads came back %s after the promotion; want < 5s", d)
	}
	checked, lost := l.ledger.verify(t, l.c, verifyKeys)
	acks, _ := l.ledger.writes()
	t.Logf("sentinel failover (wait_replicas 1): promotion %s after the kill; %d answers %v; "+
		"reads: 503 for %s after the kill (%d answers), back %s after the promotion; "+
		"writes: 503 for %s (%d answers), back %s after the old master was restarted (%s after the kill); "+
		"%d acknowledged writes on %d requests checked, %d lost",
		promoted.Sub(killed).Round(time.Millisecond), len(all), byCode,
		readBack.Sub(killed).Round(time.Millisecond), readErrs, readBack.Sub(promoted).Round(time.Millisecond),
		writeBack.Sub(killed).Round(time.Millisecond), writeErrs, writeBack.Sub(rejoined).Round(time.Millisecond),
		rejoined.Sub(killed).Round(time.Millisecond), acks, checked, lost)
	if lost != 0 {
		t.Errorf("%d acknowledged writes lost", lost)
	}
	if err := svc.terminate(); err != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0", err)
	}
}
