package histories

import (
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestUnknownWriteAppliedOnce: a transition answered 503 while Redis is
// frozen may or may not have been applied (§11), but at most once. The
// history test found heartbeats whose single call moved the version by 2 or
// 3: go-redis retried the script, after a read timeout, on new connections
// that the frozen server's kernel still accepted, and every copy ran when it
// thawed.
func TestUnknownWriteAppliedOnce(t *testing.T) {
	r := testenv.StartRedisProcess(t)
	env := baseEnv()
	env["ASYNCSTATUS_REDIS_URL"] = "redis://" + r.Addr() + "/0"
	for _, ap := range []string{"true", "false"} {
		t.Run("autopipeline="+ap, func(t *testing.T) {
			env["ASYNCSTATUS_REDIS_AUTOPIPELINE"] = ap
			w := newWorld(t, 1, env, nil)
			key := w.keys["acme"]
			c := call{method: "POST", path: "/v1/requests", key: key, body: `{"type":"hist.job"}`}
			res, _, _ := w.do(c)
			if res.outcome != OK {
				t.Fatalf("create: %+v", res)
			}
			id := res.rep.ID
			for i := range 3 {
				r.Pause()
				res, _, _ = w.do(call{method: "POST", path: "/v1/requests/" + id + "/processing", key: key, body: `{}`})
				time.Sleep(2 * time.Second) // time for any retry to be sent
				r.Resume()
				if res.outcome != Unknown {
					t.Fatalf("heartbeat %d while Redis was frozen: %+v, want 503", i, res)
				}
			}
			var got result
			for range 50 {
				if got, _, _ = w.do(call{method: "GET", path: "/v1/requests/" + id, key: key,
					headers: map[string]string{"Prefer": "wait=1", "If-None-Match": `"0"`}}); got.outcome == OK {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if got.outcome != OK {
				t.Fatalf("read after thawing: %+v", got)
			}
			// three heartbeats of unknown outcome: version 1 to 4, not more
			if got.rep.Version > 4 {
				t.Errorf("after 3 heartbeats answered 503: version %d, want at most 4 (each applied at most once)", got.rep.Version)
			}
			t.Logf("version after 3 heartbeats answered 503: %d", got.rep.Version)
		})
	}
}
