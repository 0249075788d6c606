package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestBannerOnlyOnceBound: when a listener cannot be bound (the API's or the
// console's port is taken), serve fails naming the key and the address, and
// prints no demo key: a key for a server that never ran would mislead.
func TestBannerOnlyOnceBound(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"ASYNCSTATUS_HTTP_ADDR": taken.Addr().String(), "ASYNCSTATUS_CONSOLE_ADDR": "off"}, "(http.addr)"},
		{map[string]string{"ASYNCSTATUS_HTTP_ADDR": free, "ASYNCSTATUS_CONSOLE_ADDR": taken.Addr().String()}, "(console.addr)"},
		{map[string]string{"ASYNCSTATUS_HTTP_ADDR": free, "ASYNCSTATUS_CONSOLE_ADDR": "off", "ASYNCSTATUS_METRICS_ADDR": taken.Addr().String()}, "(metrics.addr)"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out, errb syncBuffer
		err := run(ctx, []string{"serve"}, envOf(c.env), &out, &errb)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), taken.Addr().String()) {
			t.Errorf("%v: err %v, want a failure to listen naming %s", c.env, err, c.want)
		}
		if out.String() != "" {
			t.Errorf("%v: serve printed on stdout though it never served:\n%s", c.env, out.String())
		}
	}
}

// TestEmbeddedListensOnLoopback: with the embedded store, an http.addr
// without a host binds 127.0.0.1 (and says so); the banner then shows the
// API's address and the demo key. A named host is taken as written.
func TestEmbeddedListensOnLoopback(t *testing.T) {
	port := testenv.FreePort(t)
	env := map[string]string{"ASYNCSTATUS_HTTP_ADDR": fmt.Sprintf(":%d", port), "ASYNCSTATUS_CONSOLE_ADDR": "off"}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, envOf(env), &out, &errb) }()
	api := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "Demo API key"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no banner: %v\n%s", <-done, errb.String())
		}
	}
	if code, _, _ := get(t, "http://"+api+"/livez"); code != 200 {
		t.Errorf("/livez on %s: %d", api, code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	logs := errb.String()
	if !strings.Contains(logs, `"msg":"listening","addr":"`+api+`"`) || !strings.Contains(logs, "listens on loopback only") {
		t.Errorf("serve's log does not say it listens on %s alone:\n%s", api, logs)
	}
	if !strings.Contains(out.String(), "API: http://"+api) || !keyLine.MatchString(out.String()) {
		t.Errorf("banner:\n%s", out.String())
	}
}

// TestMetricsOnItsOwnListener: with metrics.addr, /metrics is served there and
// no longer on http.addr.
func TestMetricsOnItsOwnListener(t *testing.T) {
	maddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	base, logs := serveWith(t, map[string]string{"ASYNCSTATUS_METRICS_ADDR": maddr})
	code, _, body := get(t, "http://"+maddr+"/metrics")
	if code != 200 || !strings.Contains(body, "asyncstatus_build_info") {
		t.Fatalf("/metrics on metrics.addr: %d\n%.300s", code, body)
	}
	if code, _, _ := get(t, base+"/metrics"); code != 404 {
		t.Fatalf("/metrics on http.addr with metrics.addr set: %d, want 404", code)
	}
	if code, _, _ := get(t, "http://"+maddr+"/v1/requests"); code != 404 {
		t.Fatalf("the metrics listener serves the API: %d", code)
	}
	if !strings.Contains(logs.String(), `"msg":"metrics listening","addr":"`+maddr+`"`) {
		t.Fatalf("log:\n%s", logs.String())
	}
}
