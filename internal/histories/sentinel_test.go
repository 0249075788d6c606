package histories

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestHistorySentinel fails a Sentinel-managed master over under load after
// making its replica lag: the replica is frozen (SIGSTOP) and the master
// drops its replication link (CLIENT KILL TYPE replica), so that for 2 s the
// master acknowledges what the replica never gets (a partition between the
// two; freezing alone is not enough, the replica's kernel keeps receiving the
// stream, and a proxy on the link is undone by the sentinels, which point the
// replica back at the master's own address). Then the master is killed
// (SIGKILL), the replica thawed and promoted, and the old master comes back
// as its replica.
//
// With redis.wait_replicas 1 no acknowledged write may be lost: while the
// replica is frozen WAIT confirms nothing, so writes answer 503. With
// redis.wait_replicas 0 (the negative control) writes are acknowledged from
// the master alone, the failover loses them, and the checker must say so: a
// checker that cannot fail proves nothing.
func TestHistorySentinel(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait string
	}{{"wait_replicas=1", "1"}, {"wait_replicas=0 (negative control)", "0"}} {
		t.Run(strings.Fields(tc.name)[0], func(t *testing.T) {
			began := time.Now()
			master := testenv.StartRedisProcess(t, "--repl-diskless-sync-delay", "0")
			host, port, _ := net.SplitHostPort(master.Addr())
			replica := testenv.StartRedisProcess(t, "--replicaof", host, port, "--repl-diskless-sync-delay", "0")
			sentinels := testenv.StartSentinels(t, "main", master.Addr(), 3)
			env := baseEnv()
			env["ASYNCSTATUS_REDIS_SENTINEL_MASTER"] = "main"
			env["ASYNCSTATUS_REDIS_SENTINEL_ADDRS"] = strings.Join(sentinels.Addrs(), ",")
			env["ASYNCSTATUS_REDIS_WAIT_REPLICAS"] = tc.wait
			env["ASYNCSTATUS_REDIS_WAIT_TIMEOUT"] = "500ms"
			w := newWorld(t, 2, env, nil)
			d, workers := size()
			w.run(d, workers, func(ctx context.Context) {
				if !sleep(ctx, d/4) {
					return
				}
				from := time.Now()
				replica.Pause()
				admin := redis.NewClient(&redis.Options{Addr: master.Addr(), DisableIdentity: true})
				err := admin.ClientKillByFilter(ctx, "TYPE", "replica").Err()
				admin.Close()
				if err != nil {
					t.Errorf("CLIENT KILL TYPE replica: %v", err)
				}
				time.Sleep(2 * time.Second) // the replica lags from here
				master.Stop()
				replica.Resume() // it finds its master gone, without what it was not sent
				for sentinels.Master() != replica.Addr() {
					if time.Since(from) > 30*time.Second {
						t.Errorf("the sentinels did not promote %s within 30s", replica.Addr())
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				promoted := time.Now()
				if err := sentinels.WaitMaster(replica.Addr(), 10*time.Second); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Second)
				master.RestartAsReplicaOf(replica.Addr()) // testenv says why not as a master
				w.rec.fault(Window{Serve: -1, From: from, To: time.Now().Add(2 * time.Second), What: "sentinel-failover"})
				t.Logf("replication cut at %s, master killed 2s later, replica promoted %s after the kill",
					from.Format("15:04:05.000"), promoted.Sub(from.Add(2*time.Second)).Round(time.Millisecond))
			})
			waitWrites(t, w)
			w.quiesce()
			v := w.check("sentinel-wait" + tc.wait)
			v.log(t, "sentinel "+tc.name, time.Since(began))
			kinds := v.byKind()
			if tc.wait == "0" {
				// The control must fail: acknowledged writes lost, seen both by
				// the model and by name.
				if len(v.lin.Illegal) == 0 || kinds[AnomalyLostWrite]+kinds[AnomalyListMissing] == 0 {
					t.Errorf("negative control: the checker found no lost acknowledged write after a failover with wait_replicas 0 (%v)", kinds)
				}
				return
			}
			// With WAIT 1, nothing acknowledged is lost. What reads saw of
			// writes answered 503 (applied on the old master, never
			// replicated) may still vanish: reads do not wait for replicas.
			for _, k := range []string{AnomalyLostWrite, AnomalyListMissing, AnomalyListDuplicate, AnomalyTwoWinners, AnomalyMissedWakeup, AnomalyStreamOrder, AnomalyListDeleted} {
				if kinds[k] > 0 {
					t.Errorf("%d anomalies of kind %s with wait_replicas 1", kinds[k], k)
				}
			}
			if n := len(v.lin.Illegal); n > 0 {
				t.Logf("with wait_replicas 1, %d requests are not linearizable (%d reads regressed, %d saw two terminal states): "+
					"reads, long polls and streams showed writes answered 503 (applied on the old master, never "+
					"replicated) that the failover then lost; reads do not wait for replicas (docs/reliability.md)",
					n, kinds[AnomalyReadRegressed], kinds[AnomalyTerminalChanged])
			}
			requireExercised(t, w, v, "sentinel-failover")
		})
	}
}

// waitWrites waits (up to 30 s) until a create succeeds again, so that the
// final reads and walks see the recovered service.
func waitWrites(t *testing.T, w *world) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, _, _ := w.do(call{serve: w.serve(), method: "POST", path: "/v1/requests", key: w.keys[w.tenants[0]], body: `{"type":"hist.probe"}`})
		if r.outcome == OK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no create succeeded within 30s after the faults")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
