package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestRedisOutageLogIsJSON: while Redis is unreachable go-redis reports its
// failed dials; they reach serve's JSON log as structured lines (component
// go-redis), and every line of that log stays JSON.
func TestRedisOutageLogIsJSON(t *testing.T) {
	dead := fmt.Sprintf("redis://127.0.0.1:%d", testenv.FreePort(t)) // nothing listens there
	base, logs := serveWith(t, map[string]string{
		"ASYNCSTATUS_REDIS_URL":              dead,
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": strings.Repeat("s", 32),
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY":    strings.Repeat("k", 43) + "=",
		"ASYNCSTATUS_RATELIMIT_ENABLED":      "false",
	})
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), `"component":"go-redis"`); time.Sleep(50 * time.Millisecond) {
		get(t, base+"/readyz")
		if time.Now().After(deadline) {
			t.Fatalf("no go-redis line in the JSON log within 10s:\n%s", logs.String())
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
		}
	}
}
