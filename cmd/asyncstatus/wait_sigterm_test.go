package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestSIGTERMAnswersEveryWait runs the built binary with long polls and a
// stream held, sends SIGTERM, and checks that every long poll answers at once
// (well before its wait=60 and http.shutdown_timeout 30s) with the current
// state, that the stream ends, and that serve exits 0 (docs/reference.md §12).
func TestSIGTERMAnswersEveryWait(t *testing.T) {
	bin := buildBinary(t)
	redisProc := testenv.StartRedisProcess(t)
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	env := binaryEnv(redisProc.Addr(), addr, "ASYNCSTATUS_HTTP_SHUTDOWN_TIMEOUT=30s", "ASYNCSTATUS_WAIT_MAX=60s")
	key := binaryKey(t, bin, env, "acme", "read,write")
	cmd, stderr, exited := runServe(t, bin, env)
	base := "http://" + addr
	waitAccepting(t, base, key, stderr)
	var ids []string
	for len(ids) < 6 {
		code, body := post(base+"/v1/requests", key, `{"type":"export"}`)
		var m map[string]any
		if code != 202 || json.Unmarshal(body, &m) != nil {
			t.Fatalf("create: %d %s", code, body)
		}
		ids = append(ids, m["id"].(string))
	}
	type answer struct {
		code int
		body string
		err  error
	}
	answers := make(chan answer, len(ids))
	get := func(path string, hdr ...string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := (&http.Client{Timeout: 50 * time.Second}).Do(req)
		if err != nil {
			answers <- answer{err: err}
			return
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		answers <- answer{res.StatusCode, string(b), err}
	}
	for _, id := range ids[1:] {
		go get("/v1/requests/"+id, "Prefer", "wait=60")
	}
	go get("/v1/requests/" + ids[0] + "/stream")
	time.Sleep(time.Second) // the waits are held
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range ids {
		a := <-answers
		if a.err != nil || a.code != 200 {
			t.Fatalf("a wait held at SIGTERM: %d %v %s", a.code, a.err, a.body)
		}
		if !strings.Contains(a.body, `"version":1`) {
			t.Fatalf("a wait held at SIGTERM answered %s", a.body)
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	// not a timing assertion: the shutdown timeout (30s) and the waits (60s)
	// would both take longer than the whole wait above allows
	t.Logf("every wait answered and serve exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}
