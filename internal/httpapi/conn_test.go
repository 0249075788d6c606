package httpapi_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/httpapi"
)

// TestNoUnsolicitedAnswers: a connection that sends no request within
// http.read_timeout is closed without a byte written, whether it is new or kept
// alive after an answer; a half-sent header and a request that cannot be parsed
// get a 400 problem+json. A stalled body closes quietly too: fasthttp hands it
// over exactly like silence (server.go, quietOnNothingRead).
func TestNoUnsolicitedAnswers(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	e := newEnv(t, func(o *httpapi.Options) { o.ReadTimeout = readTimeout; o.IdleTimeout = readTimeout })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.srv.App().Listener(ln) }()
	t.Cleanup(func() { _ = e.srv.App().Shutdown() })

	// exchange sends what, then reads until the server closes the connection.
	exchange := func(t *testing.T, what string) []byte {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if what != "" {
			if _, err := io.WriteString(c, what); err != nil {
				t.Fatal(err)
			}
		}
		// Far beyond read_timeout: a server that never closes fails here.
		_ = c.SetReadDeadline(time.Now().Add(20 * readTimeout))
		got, err := io.ReadAll(c)
		if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("reading after %q: %v (read %q)", what, err, got)
		}
		return got
	}
	const healthz = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"

	t.Run("nothing sent", func(t *testing.T) {
		if got := exchange(t, ""); len(got) != 0 {
			t.Fatalf("a connection that sent nothing was answered: %q", got)
		}
	})
	t.Run("kept alive after one answer", func(t *testing.T) {
		got := exchange(t, healthz)
		if n := bytes.Count(got, []byte("HTTP/1.1 ")); n != 1 || !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) {
			t.Fatalf("want exactly the one 200 answer, got %d answers: %q", n, got)
		}
	})
	t.Run("short body", func(t *testing.T) {
		got := exchange(t, "POST /v1/requests HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"type\":")
		if len(got) != 0 {
			t.Fatalf("a stalled body was answered: %q", got)
		}
	})
	for name, bad := range map[string]string{
		"half a header": "GET /healthz HTTP/1.1\r\nHo",
		"malformed":     "BROKEN\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			got := exchange(t, bad)
			if !bytes.HasPrefix(got, []byte("HTTP/1.1 400 ")) ||
				!bytes.Contains(got, []byte("application/problem+json")) ||
				!bytes.Contains(got, []byte(`"code":"VALIDATION_FAILED"`)) {
				t.Fatalf("want a 400 problem+json, got %q", got)
			}
		})
	}
	// The server still answers after all that.
	if got := exchange(t, healthz); !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) {
		t.Fatalf("healthz after the cut-short connections: %q", got)
	}
}
