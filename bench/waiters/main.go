// Command waiters measures what held long polls cost one serve replica
// (docs/performance.md, "Waiting"): RSS per held long poll, the Redis
// connections the replica uses, and the ordinary poll throughput of other
// clients while the long polls are held, against the same run without them.
// It starts its own redis-server and serve (the binary named by -bin):
//
//	go build -o /tmp/asyncstatus ./cmd/asyncstatus
//	go run ./bench/waiters -bin /tmp/asyncstatus -n 10000
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	bin := flag.String("bin", "/tmp/asyncstatus", "asyncstatus binary")
	n := flag.Int("n", 10000, "long polls to hold")
	dur := flag.Duration("d", 5*time.Second, "length of each throughput measurement")
	workers := flag.Int("workers", 8, "concurrent ordinary pollers")
	flag.Parse()
	if err := run(*bin, *n, *dur, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "waiters:", err)
		os.Exit(1)
	}
}

func freePort() int {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func run(bin string, n int, dur time.Duration, workers int) error {
	rport, hport := freePort(), freePort()
	dir, _ := os.MkdirTemp("", "waiters")
	defer os.RemoveAll(dir)
	rs := exec.Command("redis-server", "--port", strconv.Itoa(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--maxclients", "1000")
	if err := rs.Start(); err != nil {
		return err
	}
	defer rs.Process.Kill()
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", rport)})
	for rdb.Ping(context.Background()).Err() != nil {
		time.Sleep(50 * time.Millisecond)
	}
	env := append(os.Environ(), fmt.Sprintf("ASYNCSTATUS_REDIS_URL=redis://127.0.0.1:%d", rport),
		fmt.Sprintf("ASYNCSTATUS_HTTP_ADDR=127.0.0.1:%d", hport),
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET=0123456789abcdef0123456789abcdef", "ASYNCSTATUS_WEBHOOKS_ENABLED=false",
		"ASYNCSTATUS_RATELIMIT_ENABLED=false", "ASYNCSTATUS_WAIT_MAX_WAITERS=50000", "ASYNCSTATUS_WAIT_MAX=120s",
		// one key holds them all: no share (wait.max_waiters_per_*)
		"ASYNCSTATUS_WAIT_MAX_WAITERS_PER_TENANT=0", "ASYNCSTATUS_WAIT_MAX_WAITERS_PER_CREDENTIAL=0",
		"ASYNCSTATUS_LOG_LEVEL=warn")
	kc := exec.Command(bin, "keys", "create", "--tenant", "bench", "--scopes", "read,write,admin")
	kc.Env = env
	out, err := kc.Output()
	if err != nil {
		return fmt.Errorf("keys create: %w", err)
	}
	key := strings.TrimSpace(string(out))
	srv := exec.Command(bin, "serve")
	srv.Env = env
	srv.Stderr = io.Discard
	if path := os.Getenv("WAITERS_SERVE_LOG"); path != "" { // e.g. with GODEBUG=gctrace=1
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		srv.Stderr = f
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Process.Kill()
	base := fmt.Sprintf("http://127.0.0.1:%d", hport)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for {
		if r, err := hc.Get(base + "/healthz"); err == nil {
			r.Body.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	create := func() string {
		req, _ := http.NewRequest("POST", base+"/v1/requests", strings.NewReader(`{"type":"export"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		r, err := hc.Do(req)
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		s := string(b)
		i := strings.Index(s, `"id":"`)
		return s[i+6 : i+42]
	}
	polled := make([]string, 100)
	for i := range polled {
		polled[i] = create()
	}
	throughput := func() float64 {
		var count atomic.Int64
		stop := time.Now().Add(dur)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; time.Now().Before(stop); i++ {
					req, _ := http.NewRequest("GET", base+"/v1/requests/"+polled[i%len(polled)], nil)
					req.Header.Set("Authorization", "Bearer "+key)
					r, err := hc.Do(req)
					if err != nil {
						continue
					}
					_, _ = io.Copy(io.Discard, r.Body)
					r.Body.Close()
					if r.StatusCode == 200 || r.StatusCode == 429 {
						count.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return float64(count.Load()) / dur.Seconds()
	}
	rss := func() int64 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.Process.Pid))
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				return v
			}
		}
		return 0
	}
	clients := func() int {
		info, _ := rdb.Info(context.Background(), "clients").Result()
		for _, l := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "connected_clients:"); ok {
				c, _ := strconv.Atoi(v)
				return c - 1 // this program's own
			}
		}
		return -1
	}
	held := func() int {
		r, err := hc.Get(base + "/metrics")
		if err != nil {
			return -1
		}
		defer r.Body.Close()
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "asyncstatus_wait_long_polls_held "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return int(f)
			}
		}
		return -1
	}
	mark := func(what string) {
		if path := os.Getenv("WAITERS_SERVE_LOG"); path != "" {
			fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), what)
		}
	}
	mark("throughput without waiters")
	tp0 := throughput()
	mark("done")
	time.Sleep(time.Second)
	rss0, cl0 := rss(), clients()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = create()
	}
	time.Sleep(time.Second)
	rssIDs := rss()
	conns := make([]net.Conn, 0, n)
	for _, id := range ids {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", hport))
		if err != nil {
			return fmt.Errorf("dial (after %d): %w", len(conns), err)
		}
		fmt.Fprintf(c, "GET /v1/requests/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nPrefer: wait=120\r\n\r\n", id, key)
		conns = append(conns, c)
	}
	deadline := time.Now().Add(60 * time.Second)
	for held() < n && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	h := held()
	time.Sleep(2 * time.Second)
	rss1, cl1 := rss(), clients()
	if cmd := os.Getenv("WAITERS_PROFILE"); cmd != "" { // e.g. "perf record -g -o /tmp/w.data -p"
		args := append(strings.Fields(cmd), strconv.Itoa(srv.Process.Pid))
		prof := exec.Command(args[0], args[1:]...)
		prof.Stdout, prof.Stderr = os.Stderr, os.Stderr
		if err := prof.Start(); err != nil {
			return err
		}
		defer func() { _ = prof.Process.Signal(os.Interrupt); _ = prof.Wait() }()
		time.Sleep(500 * time.Millisecond)
	}
	mark("throughput with waiters")
	tp1 := throughput()
	mark("done")
	fmt.Printf("long polls held: %d\n", h)
	fmt.Printf("RSS: %d KiB before, %d KiB after creating %d requests, %d KiB with them held: %.1f KiB per held long poll\n",
		rss0, rssIDs, n, rss1, float64(rss1-rssIDs)/float64(h))
	fmt.Printf("Redis connections of serve: %d before, %d with the long polls held\n", cl0, cl1)
	fmt.Printf("ordinary polls/s by %d other clients: %.0f without, %.0f with the long polls held: %.2fx\n", workers, tp0, tp1, tp1/tp0)
	for _, c := range conns {
		c.Close()
	}
	return nil
}
