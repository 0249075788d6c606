// Command edge measures what hostile clients cost one serve replica (issue
// #36; docs/performance.md, "The open-internet edge, round 2"): kernel and
// process memory with stalled event streams, RSS per held stream against per
// held long poll, other tenants' long polls while one tenant holds its
// share, the Redis cost of forged API keys, and ordinary poll throughput.
// It starts its own redis-server and serve (the binary named by -bin), so it
// can be pointed at an older build for a before figure:
//
//	go build -o /tmp/asyncstatus ./cmd/asyncstatus
//	go run ./bench/edge -bin /tmp/asyncstatus
package main

import (
	"context"
	"encoding/base32"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	bin := flag.String("bin", "/tmp/asyncstatus", "asyncstatus binary")
	stalled := flag.Int("stalled", 500, "stalled streams")
	held := flag.Int("held", 2000, "held streams and held long polls (each)")
	forged := flag.Duration("forged", 3*time.Second, "how long to send forged keys")
	dur := flag.Duration("d", 3*time.Second, "length of the poll throughput measurement")
	only := flag.String("only", "", "run one part: stalled, held, shares, forged, polls")
	legacy := flag.Bool("legacy", true, "auth.accept_legacy_keys")
	maxWaiters := flag.Int("max-waiters", 10000, "wait.max_waiters (the shares part uses 1200: one tenant could fill it)")
	flag.Parse()
	// The default shares (wait.max_waiters_per_*) stay for the shares part;
	// the others hold more waits than 4 keys' shares.
	e, err := start(*bin, *legacy, *maxWaiters, *only == "shares")
	if err != nil {
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
	defer e.stop()
	parts := []struct {
		name string
		run  func() error
	}{
		{"polls", func() error { return e.polls(*dur) }},
		{"forged", func() error { return e.forged(*forged) }},
		{"shares", e.shares},
		{"held", func() error { return e.held(*held) }},
		{"stalled", func() error { return e.stalled(*stalled) }},
	}
	for _, p := range parts {
		if *only != "" && *only != p.name {
			continue
		}
		if err := p.run(); err != nil {
			fmt.Fprintf(os.Stderr, "edge: %s: %v\n", p.name, err)
			os.Exit(1)
		}
	}
}

type env struct {
	rdb       *redis.Client
	rs, srv   *exec.Cmd
	dir, base string
	port      int
	keys      map[string]string
	hc        *http.Client
}

func freePort() int {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func start(bin string, legacy bool, maxWaiters int, shares bool) (*env, error) {
	rport, hport := freePort(), freePort()
	dir, _ := os.MkdirTemp("", "edge")
	e := &env{dir: dir, port: hport, keys: map[string]string{}, base: fmt.Sprintf("http://127.0.0.1:%d", hport),
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	e.rs = exec.Command("redis-server", "--port", strconv.Itoa(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := e.rs.Start(); err != nil {
		return nil, err
	}
	e.rdb = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", rport)})
	for e.rdb.Ping(context.Background()).Err() != nil {
		time.Sleep(50 * time.Millisecond)
	}
	env := append(os.Environ(), fmt.Sprintf("ASYNCSTATUS_REDIS_URL=redis://127.0.0.1:%d", rport),
		fmt.Sprintf("ASYNCSTATUS_HTTP_ADDR=127.0.0.1:%d", hport),
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET=0123456789abcdef0123456789abcdef", "ASYNCSTATUS_WEBHOOKS_ENABLED=false",
		"ASYNCSTATUS_RATELIMIT_ENABLED=false", "ASYNCSTATUS_WAIT_MAX=120s", "ASYNCSTATUS_WAIT_STREAM_MAX=10m",
		"ASYNCSTATUS_LIMITS_CONTEXT_BYTES=131072", "ASYNCSTATUS_LOG_LEVEL=error",
		fmt.Sprintf("ASYNCSTATUS_AUTH_ACCEPT_LEGACY_KEYS=%v", legacy), fmt.Sprintf("ASYNCSTATUS_WAIT_MAX_WAITERS=%d", maxWaiters))
	if !shares {
		env = append(env, "ASYNCSTATUS_WAIT_MAX_WAITERS_PER_TENANT=0", "ASYNCSTATUS_WAIT_MAX_WAITERS_PER_CREDENTIAL=0")
	}
	for _, t := range []string{"alpha", "beta"} {
		for _, k := range []string{"1", "2"} {
			kc := exec.Command(bin, "keys", "create", "--tenant", t, "--scopes", "read,write,admin")
			kc.Env = env
			out, err := kc.Output()
			if err != nil {
				return nil, fmt.Errorf("keys create: %w", err)
			}
			e.keys[t+k] = strings.TrimSpace(string(out))
		}
	}
	e.srv = exec.Command(bin, "serve")
	e.srv.Env = env
	e.srv.Stderr = io.Discard
	if err := e.srv.Start(); err != nil {
		return nil, err
	}
	for {
		if r, err := e.hc.Get(e.base + "/healthz"); err == nil {
			r.Body.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return e, nil
}

func (e *env) stop() {
	_ = e.srv.Process.Kill()
	_ = e.srv.Wait()
	_ = e.rs.Process.Kill()
	_ = e.rs.Wait()
	os.RemoveAll(e.dir)
}

func (e *env) call(method, path, key, body string, hdr ...string) (int, []byte) {
	req, _ := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r, err := e.hc.Do(req)
	if err != nil {
		return -1, nil
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	return r.StatusCode, b
}

func (e *env) create(key, body string) string {
	code, b := e.call("POST", "/v1/requests", key, body)
	var m map[string]any
	if code != 202 || json.Unmarshal(b, &m) != nil {
		panic(fmt.Sprintf("create: %d %s", code, b))
	}
	return m["id"].(string)
}

func (e *env) rss() int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.srv.Process.Pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// sockstatMem is the kernel's TCP memory (all sockets of the host), in KiB.
func sockstatMem() int64 {
	b, _ := os.ReadFile("/proc/net/sockstat")
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "TCP: "); ok {
			f := strings.Fields(rest)
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "mem" {
					v, _ := strconv.ParseInt(f[i+1], 10, 64)
					return v * int64(os.Getpagesize()) / 1024
				}
			}
		}
	}
	return -1
}

// sendQueues sums the unacknowledged send queues of serve's sockets, and
// counts the sockets holding one.
func (e *env) sendQueues() (total int64, n int) {
	b, _ := os.ReadFile("/proc/net/tcp")
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		_, lport, _ := strings.Cut(f[1], ":")
		p, _ := strconv.ParseInt(lport, 16, 32)
		if int(p) != e.port || f[3] == "0A" {
			continue
		}
		tx, _, _ := strings.Cut(f[4], ":")
		q, _ := strconv.ParseInt(tx, 16, 64)
		if q > 0 {
			total += q
			n++
		}
	}
	return total, n
}

func (e *env) metric(name string) float64 {
	_, b := e.call("GET", "/metrics", "", "")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

func (e *env) rawGet(path, key string, hdr ...string) net.Conn {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", e.port))
	if err != nil {
		panic(err)
	}
	extra := ""
	for i := 0; i+1 < len(hdr); i += 2 {
		extra += hdr[i] + ": " + hdr[i+1] + "\r\n"
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s\r\n", path, key, extra)
	return c
}

// stalled: n streams of one big request whose clients never read, while
// events of 100 KiB keep coming; kernel and process memory during and after
// the write timeout (10 s).
func (e *env) stalled(n int) error {
	blob, _ := json.Marshal(map[string]any{"type": "export", "context": map[string]string{"blob": strings.Repeat("x", 100<<10)}})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(time.Second)
	k0, r0 := sockstatMem(), e.rss()
	// several requests: one credential may hold at most its share
	per := 50
	keys := []string{e.keys["alpha1"], e.keys["alpha2"], e.keys["beta1"], e.keys["beta2"]}
	var ids []string
	for i := 0; len(conns) < n; i++ {
		key := keys[i%len(keys)]
		id := e.create(key, string(blob))
		ids = append(ids, id+" "+key)
		for j := 0; j < per && len(conns) < n; j++ {
			conns = append(conns, e.rawGet("/v1/requests/"+id+"/stream", key))
		}
	}
	time.Sleep(2 * time.Second)
	maxK, maxQ, maxR := int64(0), int64(0), int64(0)
	for round := range 10 {
		for _, ik := range ids {
			id, key, _ := strings.Cut(ik, " ")
			e.call("POST", "/v1/requests/"+id+"/processing", key, fmt.Sprintf(`{"percent":%d}`, round+1))
		}
		time.Sleep(300 * time.Millisecond)
		q, _ := e.sendQueues()
		maxK, maxQ, maxR = max(maxK, sockstatMem()), max(maxQ, q), max(maxR, e.rss())
	}
	time.Sleep(15 * time.Second) // past the write timeout (10 s)
	k2, r2 := sockstatMem(), e.rss()
	q2, n2 := e.sendQueues()
	fmt.Printf("stalled streams: %d (clients connected, never reading; 10 events of 100 KiB each)\n", len(conns))
	fmt.Printf("  while stalled: kernel TCP memory +%d KiB (host-wide /proc/net/sockstat), serve's send queues %d KiB (%.1f KiB a stream), serve RSS +%d KiB\n",
		maxK-k0, maxQ/1024, float64(maxQ)/1024/float64(len(conns)), maxR-r0)
	fmt.Printf("  15 s later (write timeout 10 s): kernel TCP memory +%d KiB, %d serve sockets still queue %d KiB, serve RSS +%d KiB\n",
		k2-k0, n2, q2/1024, r2-r0)
	return nil
}

// held: RSS per held stream and per held long poll, n of each, every wait on
// its own request.
func (e *env) held(n int) error {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// beyond the default shares: the keys are spread, and each tenant holds n
	keys := []string{e.keys["alpha1"], e.keys["alpha2"], e.keys["beta1"], e.keys["beta2"]}
	ids := make([]string, 2*n)
	for i := range ids {
		ids[i] = e.create(keys[i%len(keys)], `{"type":"export"}`)
	}
	measure := func(what string, extra []string, path func(id string) string, off int) {
		time.Sleep(time.Second)
		r0 := e.rss()
		for i := range n {
			conns = append(conns, e.rawGet(path(ids[off+i]), keys[(off+i)%len(keys)], extra...))
		}
		time.Sleep(3 * time.Second)
		r1 := e.rss()
		fmt.Printf("held %s: %d, RSS +%d KiB: %.1f KiB each\n", what, n, r1-r0, float64(r1-r0)/float64(n))
	}
	measure("long polls", []string{"Prefer", "wait=120"}, func(id string) string { return "/v1/requests/" + id }, 0)
	measure("streams", nil, func(id string) string { return "/v1/requests/" + id + "/stream" }, n)
	fmt.Printf("  waits held: %.0f (asyncstatus_wait_long_polls_held %.0f, asyncstatus_wait_streams_open %.0f)\n",
		e.metric("asyncstatus_wait_long_polls_held")+e.metric("asyncstatus_wait_streams_open"),
		e.metric("asyncstatus_wait_long_polls_held"), e.metric("asyncstatus_wait_streams_open"))
	return nil
}

// shares: tenant alpha's two keys open as many long polls as they can
// (1,200), then tenant beta opens 50: how many of each are held.
func (e *env) shares() error {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	id := e.create(e.keys["alpha1"], `{"type":"export"}`)
	for i := range 1200 {
		conns = append(conns, e.rawGet("/v1/requests/"+id, e.keys["alpha"+strconv.Itoa(1+i%2)], "Prefer", "wait=120"))
	}
	time.Sleep(3 * time.Second)
	a := e.metric("asyncstatus_wait_long_polls_held")
	bid := e.create(e.keys["beta1"], `{"type":"export"}`)
	var wg sync.WaitGroup
	var atOnce atomic.Int64
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/v1/requests/"+bid, nil)
			req.Header.Set("Authorization", "Bearer "+e.keys["beta"+strconv.Itoa(1+i%2)])
			req.Header.Set("Prefer", "wait=20")
			if r, err := http.DefaultClient.Do(req); err == nil {
				r.Body.Close()
				atOnce.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("shares: alpha opened 1200 long polls with 2 keys, %.0f held; beta then opened 50: %d answered at once, %d held (waited past 3 s)\n",
		a, atOnce.Load(), 50-atOnce.Load())
	return nil
}

// forged: made-up keys with the public CRC check (the legacy shape's), from
// one client: how many are answered a second, and Redis commands per key.
func (e *env) forged(d time.Duration) error {
	enc := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
	tab := crc32.MakeTable(crc32.Castagnoli)
	var n atomic.Int64
	c0 := e.commands()
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				id := enc.EncodeToString([]byte{byte(w), byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i), 1, 2, 3, 4, 5})
				body := "ask_" + id + strings.Repeat("A", 43)
				sum := crc32.Checksum([]byte(body), tab)
				key := body + enc.EncodeToString([]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
				if code, _ := e.call("GET", "/v1/requests/01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", key, ""); code == 401 {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	c1 := e.commands()
	fmt.Printf("forged keys (valid CRC, unknown id) from one client, 8 connections, %s: %.0f answered a second, %.3f Redis commands per key (%d commands for %d keys)\n",
		d, float64(n.Load())/d.Seconds(), float64(c1-c0)/float64(n.Load()), c1-c0, n.Load())
	return nil
}

// commands is Redis's total_commands_processed, less this program's own call.
func (e *env) commands() int64 {
	info, _ := e.rdb.Info(context.Background(), "stats").Result()
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "total_commands_processed:"); ok {
			c, _ := strconv.ParseInt(v, 10, 64)
			return c
		}
	}
	return -1
}

// polls: ordinary authenticated polls a second by 8 clients (most are paced,
// 429 POLLED_TOO_EARLY, which costs the same read).
func (e *env) polls(d time.Duration) error {
	key := e.keys["alpha1"]
	ids := make([]string, 50)
	for i := range ids {
		ids[i] = e.create(key, `{"type":"export"}`)
	}
	var count atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(stop); i++ {
				if code, _ := e.call("GET", "/v1/requests/"+ids[i%len(ids)], key, ""); code == 200 || code == 429 { // a paced poll is a whole poll too
					count.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("ordinary polls: %.0f a second (8 clients, %s)\n", float64(count.Load())/d.Seconds(), d)
	return nil
}
