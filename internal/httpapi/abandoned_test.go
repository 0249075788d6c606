package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestAbandonedCallsKeepTheirArguments: a store call whose handler stopped
// waiting (the op timeout, on a hung Redis) may still be written later by the
// autopipeliner, once a batch permit frees: after the handler returned and
// fasthttp reused the request's buffers for the next requests. What a
// handler gives the store must then be its own (pathID, call: the store
// clones nothing). Here the next requests on the server rewrite the path
// buffer with another request's id before Redis answers; the abandoned
// transition must still move the first request alone. (Under -race, a view
// of the buffer read by the autopipeliner is also a data race.)
func TestAbandonedCallsKeepTheirArguments(t *testing.T) {
	p := testenv.StartRedisProcess(t)
	// Batches wait for Redis's reply up to ReadTimeout, holding their permits.
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), DisableIdentity: true, ReadTimeout: 10 * time.Second,
		ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	prefix := testenv.Isolate(t)
	e := &env{t: t, rdb: rdb, clock: testenv.NewClock(time.Now().UTC())}
	var err error
	if e.st, err = store.New(rdb, store.Options{Prefix: prefix, Now: e.clock.Now, OpTimeout: 100 * time.Millisecond,
		AutoPipeline: true}); err != nil {
		t.Fatal(err)
	}
	// The key is cached for the test's length: authenticating needs no Redis.
	e.srv = e.compose(e.st, time.Hour, nil, app.Options{HTTP: httpapi.Options{BodyLimitBytes: 64 << 10}})
	if e.keys, err = testenv.SaveKeys(context.Background(), e.st, e.clock.Now(),
		testenv.TestKey{Name: "acme-rw", Tenant: "acme", Scopes: domain.ScopeRead | domain.ScopeWrite}); err != nil {
		t.Fatal(err)
	}
	mine, _ := e.mustCreate("acme-rw")
	other, _ := e.mustCreate("acme-rw")
	// Redis must know the transition script already: an abandoned EVALSHA that
	// meets NOSCRIPT has no caller left to send the EVAL.
	warm, _ := e.mustCreate("acme-rw")
	if r := e.call("POST", "/v1/requests/"+warm+"/processing", "{}", e.as("acme-rw")...); r.code != 200 {
		t.Fatalf("processing: %d %s", r.code, r.body)
	}
	p.Pause()
	defer p.Resume()
	// Eight reads, one after the other: each is sent alone and its batch holds one
	// of the eight permits until Redis answers.
	for range 8 {
		_, err := e.st.Poll(context.Background(), domain.PollParams{Call: domain.Call{Tenant: "acme"}, ID: mine})
		if domain.ErrorCode(err) != domain.BackendUnavailable {
			t.Fatalf("read on a hung Redis: %v", err)
		}
	}
	r := e.call("POST", "/v1/requests/"+mine+"/processing", "{}", e.as("acme-rw")...)
	if m := wantProblem(t, r, 503, "BACKEND_UNAVAILABLE"); !strings.Contains(m["detail"].(string), "may or may not have been applied") {
		t.Fatalf("processing on a hung Redis: %s, want an unknown outcome", r.body)
	}
	// The next requests (refused before any store call) take the pooled
	// contexts and rewrite their path buffers with the other id.
	for range 50 {
		if r := e.call("POST", "/v1/requests/"+other+"/processing", "{}"); r.code != 401 {
			t.Fatalf("no credential: %d %s", r.code, r.body)
		}
	}
	p.Resume()

	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := e.st.Poll(context.Background(), domain.PollParams{Call: domain.Call{Tenant: "acme"}, ID: mine})
		if err == nil && res.Request.Status == domain.StatusProcessing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned transition was never applied: %+v %v", res.Request, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ix := prefix + ":{acme}:ix:"
	in := func(key, id string) bool {
		err := rdb.ZScore(context.Background(), key, id).Err()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		return err == nil
	}
	if !in(ix+"p:statement.export", mine) || in(ix+"q:statement.export", mine) {
		t.Error("the processing request is not in the processing index alone")
	}
	if in(ix+"p:statement.export", other) || !in(ix+"q:statement.export", other) {
		t.Error("the transition moved another request's index entry: it ran with the rewritten id")
	}
}
