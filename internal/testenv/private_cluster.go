package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterProcs is a Redis Cluster that one test owns: 3 masters with one replica
// each, on free loopback ports, for failover tests. Unlike [Cluster], it may be
// harmed: its nodes can be killed, paused and restarted. Make it with
// [StartCluster].
type ClusterProcs struct {
	tb    testing.TB
	nodes []*Process
}

// StartCluster starts six redis-server processes, joins them with
// redis-cli --cluster create --cluster-replicas 1 into 3 masters and 3
// replicas, and waits until every slot is served and every master has an
// online replica. The nodes declare a peer failed after 1 s without an answer
// (--cluster-node-timeout 1000), so a replica is promoted 1-3 s after its master
// dies. args are added to every node's command line and override the defaults
// (e.g. "--appendonly", "yes"). Every node is killed when the test ends.
// StartCluster fails the test if the cluster cannot be made; it never skips.
func StartCluster(tb testing.TB, args ...string) *ClusterProcs {
	tb.Helper()
	bin, err := findBinary("redis-server")
	if err != nil {
		tb.Fatalf("testenv.StartCluster: %v", err)
	}
	cli, err := findBinary("redis-cli")
	if err != nil {
		tb.Fatalf("testenv.StartCluster: %v", err)
	}
	root := tb.TempDir()
	c := &ClusterProcs{tb: tb}
	for i := range clusterNodes {
		dir := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		extra := append([]string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "1000",
			// see sharedCluster: replicas listed in CLUSTER SLOTS within ~1 s
			"--repl-diskless-sync-delay", "0",
			"--repl-ping-replica-period", "1",
		}, args...)
		s, err := startServer(bin, dir, true, extra)
		if err != nil {
			tb.Fatalf("testenv.StartCluster: node %d: %v", i, err)
		}
		s.stopWith(tb)
		c.nodes = append(c.nodes, &Process{tb: tb, s: s})
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	cargs := append([]string{"--cluster", "create"}, c.Addrs()...)
	cargs = append(cargs, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, cargs...).CombinedOutput()
	if err != nil {
		tb.Fatalf("testenv.StartCluster: %s %s: %v\n%s", cli, strings.Join(cargs, " "), err, out)
	}
	if err := waitCluster(c.Addrs(), clusterMasters, clusterTimeout); err != nil {
		tb.Fatalf("testenv.StartCluster: %v\nredis-cli output:\n%s", err, out)
	}
	return c
}

// Addrs returns the addresses of all nodes, masters and replicas ("host:port").
func (c *ClusterProcs) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Node returns the node listening on addr, to Stop, Pause, Resume or Restart it.
// Restart brings it back with its nodes.conf: a master that was failed over
// rejoins as a replica of its successor.
func (c *ClusterProcs) Node(addr string) *Process {
	c.tb.Helper()
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	c.tb.Fatalf("testenv: no cluster node at %s", addr)
	return nil
}

// MasterOf returns the address of the master that serves key's slot, as the
// first node that answers sees it, or "" when no node answers or the slot has
// no master.
func (c *ClusterProcs) MasterOf(key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		if !n.s.isRunning() {
			continue
		}
		cl := newClient(n.Addr())
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		var slots []redis.ClusterSlot
		if err == nil {
			slots, err = cl.ClusterSlots(ctx).Result()
		}
		cl.Close()
		if err != nil {
			continue
		}
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr
			}
		}
		return ""
	}
	return ""
}

// WaitHealthy waits up to timeout until every slot is served by a master with
// an online replica and every node reports cluster_state:ok, e.g. after a
// failed-over master was restarted.
func (c *ClusterProcs) WaitHealthy(timeout time.Duration) error {
	var live []string
	for _, n := range c.nodes {
		if n.s.isRunning() {
			live = append(live, n.Addr())
		}
	}
	if len(live) == 0 {
		return errors.New("no node is running")
	}
	if err := waitCluster(live, clusterMasters, timeout); err != nil {
		return fmt.Errorf("cluster on %s: %w", strings.Join(live, ","), err)
	}
	return nil
}

func (s *server) isRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running()
}

// Sentinels is a group of Redis Sentinels that one test owns, watching one
// master. Make it with [StartSentinels].
type Sentinels struct {
	tb     testing.TB
	master string
	addrs  []string
}

// StartSentinels starts n redis-server --sentinel processes on free loopback
// ports that monitor the master at masterAddr under the name master, with a
// quorum of n/2+1, a master declared down after 1 s without an answer and a
// failover timeout of 5 s. It waits until every sentinel knows the others and
// the master's replicas (start the replicas first). They are killed when the
// test ends.
func StartSentinels(tb testing.TB, master, masterAddr string, n int) *Sentinels {
	tb.Helper()
	bin, err := findBinary("redis-server")
	if err != nil {
		tb.Fatalf("testenv.StartSentinels: %v", err)
	}
	host, port, ok := strings.Cut(masterAddr, ":")
	if !ok {
		tb.Fatalf("testenv.StartSentinels: bad master address %q", masterAddr)
	}
	s := &Sentinels{tb: tb, master: master}
	for i := range n {
		var addr string
		var err error
		for range startAttempts { // another process may take the port first
			if addr, err = startSentinel(tb, bin, master, host, port, n/2+1); err == nil {
				break
			}
		}
		if err != nil {
			tb.Fatalf("testenv.StartSentinels: sentinel %d: %v", i, err)
		}
		s.addrs = append(s.addrs, addr)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range s.addrs {
		for {
			err := s.knows(a, n-1)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("testenv.StartSentinels: %s: %v", a, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return s
}

// knows reports why the sentinel at addr is not ready yet: it must see the other
// sentinels and at least one replica of the master.
func (s *Sentinels) knows(addr string, others int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c := redis.NewSentinelClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer c.Close()
	peers, err := c.Sentinels(ctx, s.master).Result()
	if err != nil {
		return err
	}
	if len(peers) < others {
		return fmt.Errorf("knows %d other sentinels, want %d", len(peers), others)
	}
	replicas, err := c.Replicas(ctx, s.master).Result()
	if err != nil {
		return err
	}
	if len(replicas) == 0 {
		return errors.New("knows no replica of the master")
	}
	return nil
}

// Addrs returns the sentinels' addresses.
func (s *Sentinels) Addrs() []string { return append([]string(nil), s.addrs...) }

// Master returns the master's address as the first sentinel that answers sees
// it, or "".
func (s *Sentinels) Master() string {
	for _, a := range s.addrs {
		if m := s.masterOf(a); m != "" {
			return m
		}
	}
	return ""
}

// WaitMaster waits until every sentinel names addr as the master, and says
// which do not when that takes longer than timeout. One sentinel reports a
// promotion before the others have heard of it; an operator (or a test) that
// acts on the first report acts on a configuration the others may not share.
func (s *Sentinels) WaitMaster(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var stale []string
		for _, a := range s.addrs {
			if m := s.masterOf(a); m != addr {
				stale = append(stale, fmt.Sprintf("%s names %q", a, m))
			}
		}
		if len(stale) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the sentinels did not all name %s as the master within %s: %s",
				addr, timeout, strings.Join(stale, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// masterOf returns the master's address as the sentinel at addr sees it, or "".
func (s *Sentinels) masterOf(addr string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c := redis.NewSentinelClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer c.Close()
	v, err := c.GetMasterAddrByName(ctx, s.master).Result()
	if err != nil || len(v) != 2 {
		return ""
	}
	return v[0] + ":" + v[1]
}

// startSentinel starts one sentinel on a free port and waits until it answers.
func startSentinel(tb testing.TB, bin, master, host, port string, quorum int) (string, error) {
	dir := tb.TempDir()
	p, err := freePort(false)
	if err != nil {
		return "", err
	}
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel resolve-hostnames no\n"+
		"sentinel monitor %s %s %s %d\nsentinel down-after-milliseconds %s 1000\n"+
		"sentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
		p, dir, master, host, port, quorum, master, master, master)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		return "", err
	}
	logPath := filepath.Join(dir, "sentinel.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd := exec.Command(bin, conf, "--sentinel")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := spawn(cmd); err != nil {
		return "", err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() { _ = cmd.Process.Kill(); <-done }
	addr := fmt.Sprintf("127.0.0.1:%d", p)
	dump := func() {
		stop()
		// The sentinels' log is the only account of who promoted whom, and
		// when; keep it when the test fails.
		if tb.Failed() {
			tb.Logf("--- last lines of sentinel %s ---\n%s", addr, fileTail(logPath, 60))
		}
	}
	if err := waitPing(addr, done, startTimeout); err != nil {
		stop()
		b, _ := os.ReadFile(logPath)
		return "", fmt.Errorf("on %s: %w\n%s", addr, err, b)
	}
	if pid, err := serverPID(addr); err != nil || pid != cmd.Process.Pid {
		stop() // someone else answers on that port
		return "", fmt.Errorf("on %s: %w: the server answering there has pid %d (%v)", addr, errPortTaken, pid, err)
	}
	tb.Cleanup(dump)
	return addr, nil
}
