package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// serverSendQueues reads /proc/net/tcp and returns the bytes each socket
// whose local port is port has queued to send and not had acknowledged
// (tx_queue): kernel memory the server's sockets pin, orphaned ones included.
func serverSendQueues(t testing.TB, port int) []int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatalf("kernel socket table: %v", err)
	}
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		_, lport, _ := strings.Cut(fs[1], ":")
		p, _ := strconv.ParseInt(lport, 16, 32)
		if int(p) != port || fs[3] == "0A" { // 0A: the listener
			continue
		}
		tx, _, _ := strings.Cut(fs[4], ":")
		q, _ := strconv.ParseInt(tx, 16, 64)
		out = append(out, int(q))
	}
	return out
}

// stalledStream opens a stream on a raw connection with a small receive
// buffer and never reads from it.
func stalledStream(t testing.TB, addr, path, key string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, key)
	return conn
}

// TestStalledStreamsPinLittleKernelMemory: streams whose clients stop
// reading while large events keep coming queue at most a small, fixed
// amount each in the kernel (a bounded send buffer), and once their write
// timeout ends them, nothing: the connection is reset rather than left to
// drain to a client that stays connected. Read from the kernel's socket
// table; bounded in time (about 10 s).
func TestStalledStreamsPinLittleKernelMemory(t *testing.T) {
	w := newWaitServer(t, func(o *app.Options) {
		o.HTTP.WriteTimeout = time.Second
		o.HTTP.Limits = domain.Limits{ContextBytes: 128 << 10, ResultBytes: 16 << 10}
		o.HTTP.BodyLimitBytes = 1 << 20
	})
	ctxBody, _ := json.Marshal(map[string]any{"type": "export", "context": map[string]string{"blob": strings.Repeat("x", 100<<10)}})
	r := do(t, "POST", w.url+"/v1/requests", string(ctxBody), 5*time.Second, "Authorization", "Bearer "+w.keys["acme"])
	if r.code != 202 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	id := r.request(t).ID
	addr := strings.TrimPrefix(w.url, "http://")
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)

	const streams = 8
	for range streams {
		stalledStream(t, addr, "/v1/requests/"+id+"/stream", w.keys["acme"])
	}
	waitWaiting(t, w.srv, streams)
	// every transition is a 100 KiB event to every stream
	most := 0
	for i := range 30 {
		// A busy machine may make a 100 KiB rewrite miss the store's deadline
		// (503, may or may not be applied): this test is about the streams, so
		// such a write is sent again.
		var p httpResp
		for try := 0; try < 5; try++ {
			p = do(t, "POST", w.url+"/v1/requests/"+id+"/processing", fmt.Sprintf(`{"percent":%d}`, i+1), 5*time.Second,
				"Authorization", "Bearer "+w.keys["acme"])
			if p.code != 503 {
				break
			}
		}
		if p.code != 200 {
			t.Fatalf("progress: %d %s", p.code, p.body)
		}
		time.Sleep(20 * time.Millisecond)
		for _, q := range serverSendQueues(t, port) {
			most = max(most, q)
		}
	}
	t.Logf("largest send queue of a stalled stream's socket: %d bytes", most)
	if most > 128<<10 {
		t.Errorf("a stalled stream's socket queued %d bytes, want at most 128 KiB (a bounded send buffer)", most)
	}
	// the write timeout (1 s) ends every stream; its socket must not keep
	// its queue while the client stays connected
	deadline := time.Now().Add(6 * time.Second)
	for {
		total, n := 0, 0
		for _, q := range serverSendQueues(t, port) {
			total += q
			if q > 0 {
				n++
			}
		}
		if total == 0 && w.srv.Waiting() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("6 s after the last event, %d server sockets still queue %d bytes (%d streams held): timed-out streams were left to drain",
				n, total, w.srv.Waiting())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
