package testenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

const (
	clusterMasters = 3
	clusterNodes   = 2 * clusterMasters // one replica per master
	clusterSlots   = 16384
	clusterTimeout = 30 * time.Second // from the first start until the cluster is ready
)

// Cluster returns seed addresses ("host:port") of a Redis Cluster for this
// test binary, with every slot covered and every master replicated.
//
// With ASYNCSTATUS_TEST_CLUSTER_ADDRS (comma-separated) set, that cluster is
// used after checking that it is healthy. Otherwise, the first time Cluster
// is called, six redis-server processes are started on free loopback ports
// and joined with redis-cli --cluster create --cluster-replicas 1 into 3
// masters and 3 replicas; Cluster waits (up to 30s) until cluster_state is
// ok on every node, all 16384 slots are served, every master has a replica
// whose link is up. All tests of the binary share it and [Main] stops it.
//
// Cluster fails the test if no cluster can be had; it never skips.
func Cluster(tb testing.TB) []string {
	tb.Helper()
	requireMain(tb, "Cluster")
	shared.clusterOnce.Do(func() {
		shared.clusterAddrs, shared.clusterErr = sharedCluster()
	})
	if shared.clusterErr != nil {
		tb.Fatalf("testenv.Cluster: no Redis Cluster for the tests: %v", shared.clusterErr)
	}
	return slices.Clone(shared.clusterAddrs)
}

func sharedCluster() ([]string, error) {
	if env := strings.TrimSpace(os.Getenv(EnvClusterAddrs)); env != "" {
		var addrs []string
		for a := range strings.SplitSeq(env, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		if err := waitCluster(addrs, 0, 10*time.Second); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvClusterAddrs, env, err)
		}
		return addrs, nil
	}

	deadline := time.Now().Add(clusterTimeout)
	bin, err := findBinary("redis-server")
	if err != nil {
		return nil, err
	}
	cli, err := findBinary("redis-cli")
	if err != nil {
		return nil, err
	}
	root, err := tempDir("cluster")
	if err != nil {
		return nil, err
	}
	shared.ownDir(root)

	var started []*server
	fail := func(err error) ([]string, error) {
		for _, s := range started {
			s.kill()
		}
		return nil, err
	}
	var addrs []string
	for i := range clusterNodes {
		dir := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(err)
		}
		s, err := startServer(bin, dir, true, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "5000",
			// Redis 7 lists a replica in CLUSTER SLOTS only once its
			// replication offset is non-zero: sync at once (instead of
			// waiting 5s for more replicas) and let the master's replication
			// PING move the offset after 1s (instead of 10s).
			"--repl-diskless-sync-delay", "0",
			"--repl-ping-replica-period", "1",
		})
		if err != nil {
			return fail(fmt.Errorf("cluster node %d: %w", i, err))
		}
		shared.own(s)
		started = append(started, s)
		addrs = append(addrs, s.addr())
	}

	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return fail(fmt.Errorf("%s %s: %v\n%s", cli, strings.Join(args, " "), err, out))
	}
	if err := waitCluster(addrs, clusterMasters, time.Until(deadline)); err != nil {
		return fail(fmt.Errorf("cluster on %s: %w\nredis-cli output:\n%s", strings.Join(addrs, ","), err, out))
	}
	return addrs, nil
}

// waitCluster polls until checkCluster succeeds or timeout passes.
func waitCluster(seeds []string, wantMasters int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := checkCluster(seeds, wantMasters)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkCluster reports why the cluster reached through seeds is not ready
// yet, or nil: all slots covered, every slot range served by a master and at
// least one replica, wantMasters masters (if > 0), and on every node
// cluster_state:ok, all nodes known and, on replicas, master_link_status:up.
func checkCluster(seeds []string, wantMasters int) error {
	if len(seeds) == 0 {
		return errors.New("no seed addresses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	var slots []redis.ClusterSlot
	var err error
	for _, a := range seeds {
		c := newClient(a)
		slots, err = c.ClusterSlots(ctx).Result()
		c.Close()
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
	masters, replicas := map[string]bool{}, map[string]bool{}
	next := 0
	for _, r := range slots {
		if r.Start != next {
			return fmt.Errorf("slots %d-%d are not served", next, r.Start-1)
		}
		next = r.End + 1
		if len(r.Nodes) < 2 {
			return fmt.Errorf("slots %d-%d have no replica", r.Start, r.End)
		}
		masters[r.Nodes[0].Addr] = true
		for _, n := range r.Nodes[1:] {
			replicas[n.Addr] = true
		}
	}
	if next != clusterSlots {
		return fmt.Errorf("slots %d-%d are not served", next, clusterSlots-1)
	}
	if wantMasters > 0 && len(masters) != wantMasters {
		return fmt.Errorf("%d masters, want %d", len(masters), wantMasters)
	}
	nodes := len(masters) + len(replicas)
	for _, s := range seeds {
		if !masters[s] && !replicas[s] {
			nodes++ // a seed without slots (should not happen) still has to be healthy
		}
	}

	check := func(addr string, replica bool) error {
		c := newClient(addr)
		defer c.Close()
		info, err := c.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", addr, err)
		}
		f := infoFields(info)
		if f["cluster_state"] != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", addr, f["cluster_state"])
		}
		if f["cluster_slots_ok"] != strconv.Itoa(clusterSlots) {
			return fmt.Errorf("%s: cluster_slots_ok:%s", addr, f["cluster_slots_ok"])
		}
		if f["cluster_known_nodes"] != strconv.Itoa(nodes) {
			return fmt.Errorf("%s: knows %s nodes, want %d", addr, f["cluster_known_nodes"], nodes)
		}
		if replica {
			info, err := c.Info(ctx, "replication").Result()
			if err != nil {
				return fmt.Errorf("%s: INFO replication: %w", addr, err)
			}
			if s := infoFields(info)["master_link_status"]; s != "up" {
				return fmt.Errorf("%s: replica master_link_status:%s", addr, s)
			}
		}
		return nil
	}
	for _, a := range slices.Sorted(maps.Keys(masters)) {
		if err := check(a, false); err != nil {
			return err
		}
	}
	for _, a := range slices.Sorted(maps.Keys(replicas)) {
		if err := check(a, true); err != nil {
			return err
		}
	}
	return nil
}

func infoFields(info string) map[string]string {
	f := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	return f
}

// FlushCluster erases every key of the Redis Cluster reached through addrs
// (FLUSHALL on every master; replicas follow). The caveat of [FlushRedis]
// applies: don't flush a cluster shared with other test binaries.
func FlushCluster(tb testing.TB, addrs []string) {
	tb.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                    addrs,
		DialTimeout:              2 * time.Second,
		ReadTimeout:              5 * time.Second,
		WriteTimeout:             5 * time.Second,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.FlushAll(ctx).Err()
	})
	if err != nil {
		tb.Fatalf("testenv.FlushCluster(%s): %v", strings.Join(addrs, ","), err)
	}
}
