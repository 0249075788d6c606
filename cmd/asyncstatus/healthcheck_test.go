package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestHealthcheck: healthcheck succeeds on a 200 alone, and by default asks
// /readyz on loopback at the port of http.addr, which is what a container
// health check needs from a binary that has no curl beside it.
func TestHealthcheck(t *testing.T) {
	var (
		mu     sync.Mutex // the handler runs on the server's goroutines
		status = http.StatusOK
		paths  []string
	)
	setStatus := func(s int) { mu.Lock(); status = s; mu.Unlock() }
	asked := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), paths...) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		s := status
		mu.Unlock()
		w.WriteHeader(s)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	check := func(env []string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"healthcheck"}, args...), env, &out, &errOut)
		return out.String(), err
	}

	t.Run("ReadyByDefaultURL", func(t *testing.T) {
		out, err := check([]string{"ASYNCSTATUS_HTTP_ADDR=:" + port})
		if err != nil {
			t.Fatalf("healthcheck against a 200: %v", err)
		}
		if p := asked(); len(p) != 1 || p[0] != "/readyz" {
			t.Fatalf("paths asked: %q, want [/readyz]", p)
		}
		if want := "http://127.0.0.1:" + port + "/readyz"; !strings.Contains(out, want) {
			t.Fatalf("output %q does not name %s", out, want)
		}
	})
	t.Run("NotReady", func(t *testing.T) {
		setStatus(http.StatusServiceUnavailable)
		defer setStatus(http.StatusOK)
		_, err := check(nil, "--url", srv.URL+"/readyz")
		if err == nil || !strings.Contains(err.Error(), "503") {
			t.Fatalf("healthcheck against a 503: err %v, want one naming 503", err)
		}
		if exitCode(err) != 1 {
			t.Fatalf("exit status %d, want 1", exitCode(err))
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if _, err := check(nil, "--url", "http://"+addr+"/healthz"); err == nil {
			t.Fatalf("healthcheck against a closed port %s succeeded", addr)
		}
	})
	t.Run("StrayArgument", func(t *testing.T) {
		_, err := check(nil, "now")
		if exitCode(err) != 2 {
			t.Fatalf("healthcheck now: err %v (exit %d), want a usage error", err, exitCode(err))
		}
	})
}
