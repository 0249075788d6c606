package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestWebhookSurvivesKill runs the built binary against Redis, registers an
// endpoint, and SIGKILLs serve while one message is being delivered (the
// receiver holds the request) and right after another transition was
// answered. A new serve process delivers both: each message is in Redis from
// the transition's own script on, and the one whose delivery died with the
// process is taken over within webhooks.timeout + 10 s.
func TestWebhookSurvivesKill(t *testing.T) {
	bin := buildBinary(t)
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	env := binaryEnv(testenv.Redis(t), addr,
		"ASYNCSTATUS_REDIS_KEY_PREFIX="+testenv.Isolate(t),
		"ASYNCSTATUS_WEBHOOKS_ALLOW_HTTP=true", "ASYNCSTATUS_WEBHOOKS_ALLOW_PRIVATE=true",
		"ASYNCSTATUS_WEBHOOKS_TIMEOUT=1s",
		"ASYNCSTATUS_RATELIMIT_ENABLED=false")
	key := binaryKey(t, bin, env, "acme", "read,write,admin")

	// The receiver holds every request until the first process is dead, then
	// accepts; it verifies each signature as the Standard Webhooks spec says.
	var (
		mu       sync.Mutex
		secret   string
		hold     = make(chan struct{})
		held     = make(chan string, 16)
		accepted = map[string]time.Time{}
		badSig   []string
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		mu.Lock()
		keyBytes, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		mac := hmac.New(sha256.New, keyBytes)
		mac.Write([]byte(id + "." + ts + "." + string(body)))
		if r.Header.Get("webhook-signature") != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
			badSig = append(badSig, id)
		}
		mu.Unlock()
		select {
		case <-hold:
		default:
			held <- id
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		mu.Lock()
		if _, ok := accepted[id]; !ok {
			accepted[id] = time.Now()
		}
		mu.Unlock()
		w.WriteHeader(200)
	}))
	defer rcv.Close()

	serve := func() (kill func()) {
		cmd, stderr, exited := runServe(t, bin, env)
		waitAccepting(t, "http://"+addr, key, stderr)
		return sync.OnceFunc(func() { _ = cmd.Process.Kill(); <-exited })
	}
	base := "http://" + addr
	kill := serve()
	code, body := post(base+"/v1/webhooks", key, `{"url":"`+rcv.URL+`/hook","events":["request.succeeded"]}`)
	if code != 201 {
		t.Fatalf("register: %d %s", code, body)
	}
	var reg struct{ Secret string }
	_ = json.Unmarshal(body, &reg)
	mu.Lock()
	secret = reg.Secret
	mu.Unlock()

	complete := func() string {
		code, body := post(base+"/v1/requests", key, `{"type":"report.build"}`)
		var r struct{ ID string }
		_ = json.Unmarshal(body, &r)
		if code != 202 {
			t.Fatalf("create: %d %s", code, body)
		}
		if code, body := post(base+"/v1/requests/"+r.ID+"/complete", key, `{"result_type":"answer","result":{"ok":true}}`); code != 200 {
			t.Fatalf("complete: %d %s", code, body)
		}
		return "msg_" + r.ID + "_s"
	}
	inFlight := complete()
	var firstAttempt time.Time
	select {
	case id := <-held:
		firstAttempt = time.Now()
		if id != inFlight {
			t.Fatalf("held %s, want %s", id, inFlight)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first process never delivered")
	}
	justDone := complete()
	kill() // SIGKILL: no shutdown, nothing settled
	close(hold)

	serve()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		a, b := accepted[inFlight], accepted[justDone]
		mu.Unlock()
		if !a.IsZero() && !b.IsZero() {
			if took := a.Sub(firstAttempt); took > 11*time.Second+2*time.Second {
				t.Errorf("the message in flight was delivered again %s after its first attempt, want within webhooks.timeout + 10s", took)
			}
			t.Logf("message in flight re-delivered %s after its first attempt (timeout 1s)", a.Sub(firstAttempt).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: in flight delivered %v, just completed delivered %v", !a.IsZero(), !b.IsZero())
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(badSig) > 0 {
		t.Fatalf("bad signatures on %v", badSig)
	}
}
