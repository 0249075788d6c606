package faults

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// slowBodies is how many connections TestSlowBodiesMemory opens (docs/reference.md §7).
const slowBodies = 2000

// maxSlowBodyRise is what those connections may add to the service's RSS:
// the bound of docs/reference.md §7 ("Hostile input": 2,000 such connections raise the RSS
// by at most 100 MB, about 50 KiB a connection). Since bodies are streamed
// a connection holds fasthttp's 8 KiB body prefetch, its 4 KiB read buffer, a
// goroutine stack and a request context: docs/performance.md has the figure
// (about 20 MB for all 2,000). Were a connection to hold the 1 MiB it declares
// (fasthttp's default, docs/pitfalls.md), 2,000 would take 2.1 GB: the bound
// is far from both the figure and the fault.
const maxSlowBodyRise = 100 << 20

// TestSlowBodiesMemory runs the built service (without -race: the race
// detector's own memory would be measured), opens 2,000 unauthenticated
// connections that each send the headers of a create declaring a 1 MiB body
// and then one byte of it, and reads the service's RSS from /proc while they
// hang: it must rise by at most maxSlowBodyRise, and a poll from another
// connection must be answered meanwhile. It takes a few seconds (plus one
// build of the binary).
func TestSlowBodiesMemory(t *testing.T) {
	raiseFileLimit(t, 2*slowBodies+500) // this side's sockets; the service raises its own
	r := testenv.StartRedisProcess(t)
	env := baseEnv(5 * time.Second)
	env["ASYNCSTATUS_REDIS_URL"] = "redis://" + r.Addr() + "/0"
	env["ASYNCSTATUS_HTTP_READ_TIMEOUT"] = "60s" // the slow bodies must outlast the measurement
	svc := startServiceOf(t, plainServiceBinary(t), env)
	key := newKey(t, env, "acme")
	addr := strings.TrimPrefix(svc.base, "http://")

	id := createOne(t, svc.base, key)
	// Warm up the paths the measurement uses, so their first-use costs are not counted.
	for i := 0; i < 20; i++ {
		if code := pollOnce(svc.base, key, id); code != 200 && code != 429 {
			t.Fatalf("poll answered %d", code)
		}
	}
	time.Sleep(200 * time.Millisecond)
	before := rss(t, svc.PID())

	// Two waves: the second one also meets memory the first one left to the
	// runtime (reused memory is zeroed, so resident, where fresh memory from
	// the OS is not until written): the fault showed from the second wave on.
	for wave := 1; wave <= 2; wave++ {
		rise, open, pollCode := slowBodyWave(t, svc, addr, key, id, before)
		svc.alive()
		t.Logf("wave %d: RSS %.1f MB before, +%.1f MB with %d slow bodies (%d still open when measured), %.1f KiB a connection; a poll meanwhile answered %d",
			wave, mb(before), mb(rise), slowBodies, open, float64(rise)/1024/slowBodies, pollCode)
		if pollCode != 200 && pollCode != 429 {
			t.Errorf("wave %d: a poll while the slow bodies hung answered %d", wave, pollCode)
		}
		if open < slowBodies*9/10 {
			t.Errorf("wave %d: only %d of %d slow connections were still open when measured", wave, open, slowBodies)
		}
		if rise > maxSlowBodyRise {
			t.Fatalf("wave %d: %d slow bodies raised the RSS by %.1f MB, more than %.0f MB", wave, slowBodies, mb(rise), mb(maxSlowBodyRise))
		}
	}
}

// slowBodyWave opens the slow connections, samples the service's RSS for two
// seconds once they are all open (polling from another connection
// meanwhile), then closes them and lets the service see them go. It returns
// the peak RSS over before, how many connections were still open at the end
// of the sampling, and the status of the poll.
func slowBodyWave(t *testing.T, svc *service, addr, key, id string, before int64) (rise int64, open, pollCode int) {
	t.Helper()
	head := "POST /v1/requests HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{"
	conns := make([]net.Conn, slowBodies)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		time.Sleep(time.Second) // the service notices the closes and drops what they held
	}()
	var wg sync.WaitGroup
	errs := make(chan error, slowBodies)
	const dialers = 50
	deadline := time.Now().Add(30 * time.Second)
	for w := 0; w < dialers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < slowBodies; i += dialers {
				c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
				if err == nil {
					_ = c.SetDeadline(deadline)
					_, err = io.WriteString(c, head)
				}
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	peak := before
	for start := time.Now(); time.Since(start) < 2*time.Second; {
		time.Sleep(100 * time.Millisecond)
		peak = max(peak, rss(t, svc.PID()))
		if pollCode == 0 || pollCode >= 500 {
			pollCode = pollOnce(svc.base, key, id)
		}
	}
	// Nothing has answered the slow connections: they are still open.
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open++
			}
		}
	}
	return peak - before, open, pollCode
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// rss is a process's resident set size, from /proc/<pid>/status.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/pid/status")
	return 0
}

// raiseFileLimit raises this process's open-file limit to at least n, as far
// as the hard limit allows (Go raises the soft limit to the hard one at start
// already; this covers a hard limit that a test runner lowered since).
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	lim.Cur = min(max(n, lim.Cur), lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < n {
		t.Fatalf("need %d open files, the hard limit allows %d (%v): raise ulimit -Hn", n, lim.Max, err)
	}
}

// createOne creates a request and returns its id.
func createOne(t *testing.T, base, key string) string {
	t.Helper()
	a, body := newClient(base).do(request{op: "create", method: "POST", path: "/v1/requests", key: key, body: `{"type":"slow.bodies"}`})
	id, _ := body["id"].(string)
	if a.code != 202 || id == "" {
		t.Fatalf("create: %s", a)
	}
	return id
}

// pollOnce polls id on a new connection and returns the status (0: no answer).
func pollOnce(base, key, id string) int {
	c := newClient(base)
	c.hc.Timeout = 5 * time.Second
	c.hc.Transport = &http.Transport{DisableKeepAlives: true}
	a, _ := c.do(request{op: "poll", method: "GET", path: "/v1/requests/" + id, key: key})
	return a.code
}
