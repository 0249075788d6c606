package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestPollingStorm: 200 concurrent callers hammering one request with its poll token
// are turned away with 429s, no answer is a server error, every 200 is a correct
// representation, and a well-behaved API-key caller that honours Retry-After keeps
// getting its answers; the request still completes normally.
func TestPollingStorm(t *testing.T) {
	env := map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://" + testenv.Redis(t) + "/0",
		"ASYNCSTATUS_REDIS_KEY_PREFIX": testenv.Isolate(t), "ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": strings.Repeat("s", 32),
		"ASYNCSTATUS_RATELIMIT_ENABLED": "true", "ASYNCSTATUS_WEBHOOKS_SECRET_KEY": strings.Repeat("w", 32), "ASYNCSTATUS_POLLING_SCHEDULE": "1s", "ASYNCSTATUS_LOG_LEVEL": "error"}
	out, _, err := runCmd(t, env, "keys", "create", "--tenant", "storm", "--scopes", "read,write")
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(out)
	base, _, _ := serving(t, env)
	code, created, _ := do(t, "POST", base+"/v1/requests", key, `{"type":"x"}`)
	if code != 202 {
		t.Fatal(code)
	}
	id, tok := created["id"].(string), created["poll_token"].(string)
	url := base + "/v1/requests/" + id

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}, Timeout: 10 * time.Second}
	var codes sync.Map // status -> *atomic.Int64
	count := func(c int) {
		v, _ := codes.LoadOrStore(c, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Value
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("X-Poll-Token", tok)
				res, err := client.Do(req)
				if err != nil {
					bad.Store(err.Error())
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				count(res.StatusCode)
				switch res.StatusCode {
				case 200:
					var m map[string]any
					if json.Unmarshal(b, &m) != nil || m["id"] != id {
						bad.Store("bad 200 body: " + string(b))
					}
				case 429:
					if ra, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || ra < 1 || !strings.Contains(string(b), `"code":"`) {
						bad.Store("bad 429: " + res.Header.Get("Retry-After") + string(b))
					}
				default:
					bad.Store("unexpected status " + strconv.Itoa(res.StatusCode) + ": " + string(b))
				}
			}
		}()
	}

	// the well-behaved caller: polls when told to, three times
	polite := 0
	for range 3 {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("well-behaved poll answered %d", res.StatusCode)
		}
		polite++
		ra, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		time.Sleep(time.Duration(max(ra, 1)) * time.Second)
	}
	close(stop)
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	total, too := int64(0), int64(0)
	codes.Range(func(k, v any) bool {
		n := v.(*atomic.Int64).Load()
		total += n
		if k.(int) == 429 {
			too = n
		}
		return true
	})
	t.Logf("storm: %d answers, %d of them 429; the polite caller got %d/3", total, too, polite)
	if total < 200 || too < total/2 {
		t.Fatalf("the storm was not turned away: %d answers, %d 429s", total, too)
	}
	if code, r, _ := do(t, "POST", url+"/complete", key, `{"result_type":"answer","result":{"ok":true}}`); code != 200 || r["status"] != "succeeded" {
		t.Fatalf("complete after the storm: %d %v", code, r)
	}
}
