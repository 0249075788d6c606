package histories

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestHistoryCluster kills (SIGKILL) a master of a Redis Cluster of the
// test's own while long polls and streams are held on requests whose shards
// it serves, with redis.wait_replicas 1. The cluster promotes its replica,
// the old master comes back as the new one's replica. No acknowledged write
// may be lost, and every waiter must still learn of the changes acknowledged
// while and after its shard failed over (within the bound past the fault).
func TestHistoryCluster(t *testing.T) {
	began := time.Now()
	cl := testenv.StartCluster(t, "--cluster-require-full-coverage", "no")
	env := baseEnv()
	env["ASYNCSTATUS_REDIS_CLUSTER_ADDRS"] = strings.Join(cl.Addrs(), ",")
	env["ASYNCSTATUS_REDIS_WAIT_REPLICAS"] = "1"
	env["ASYNCSTATUS_REDIS_WAIT_TIMEOUT"] = "500ms"
	w := newWorld(t, 2, env, nil)
	d, workers := size()
	w.run(d, workers, func(ctx context.Context) {
		if !sleep(ctx, d/3) {
			return
		}
		victim := cl.MasterOf("{acme}")
		from := time.Now()
		cl.Node(victim).Stop()
		for m := cl.MasterOf("{acme}"); m == victim || m == ""; m = cl.MasterOf("{acme}") {
			if time.Since(from) > 30*time.Second {
				t.Errorf("no replica of %s was promoted within 30s", victim)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		promoted := time.Now()
		time.Sleep(time.Second)
		cl.Node(victim).Restart() // it rejoins as the replica of its successor
		w.rec.fault(Window{Serve: -1, From: from, To: time.Now().Add(2 * time.Second), What: "cluster-master-kill"})
		t.Logf("master %s killed at %s, replica promoted %s later", victim, from.Format("15:04:05.000"),
			promoted.Sub(from).Round(time.Millisecond))
	})
	if err := cl.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitWrites(t, w)
	w.quiesce()
	v := w.check("cluster")
	v.log(t, "cluster, 2 serves", time.Since(began))
	requireClean(t, v)
	requireExercised(t, w, v, "cluster-master-kill")
}
