package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// replicated starts a master and one replica of it, both owned by the test, and
// waits until the replica is online.
func replicated(t *testing.T) (master, replica *testenv.Process) {
	t.Helper()
	master = testenv.StartRedisProcess(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(master.Addr())
	replica = testenv.StartRedisProcess(t, "--replicaof", host, port)
	waitReplicas(t, master.Addr(), 1)
	return master, replica
}

// waitReplicas waits until WAIT on the master at addr confirms n replicas: a
// replica the master lists as online may still be loading what it was sent.
func waitReplicas(t *testing.T, addr string, n int) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		pipe := c.Pipeline()
		pipe.Set(ctx, "probe", "1", time.Minute)
		wait := redis.NewIntCmd(ctx, "wait", n, 100)
		_ = pipe.Process(ctx, wait)
		_, err := pipe.Exec(ctx)
		if err == nil && wait.Val() >= int64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: WAIT %d confirmed %d: %v", addr, n, wait.Val(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func durableStore(t *testing.T, rdb redis.UniversalClient, waitReplicas int, prefix string) *store.Store {
	t.Helper()
	// Generous: the machine running the tests may be busy; the cases that must
	// fail (a hung or missing replica) take WaitTimeout each.
	s, err := store.New(rdb, store.Options{Prefix: prefix, OpTimeout: 2 * time.Second,
		WaitReplicas: waitReplicas, WaitTimeout: time.Second, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func createWithKey(s *store.Store, tenant, key string) (*domain.Request, bool, error) {
	return s.Create(ctx, domain.CreateParams{
		Call:    domain.Call{Tenant: tenant, By: "key_a"},
		IdemKey: domain.IdempotencyKey(key),
		Input:   domain.CreateInput{Type: "export", Context: json.RawMessage(`{"a":1}`)},
	})
}

// wantUnknownOutcome checks that err is the 503 of docs/reference.md §11 that says the write may or
// may not have been applied and that a retry with the same key is safe.
func wantUnknownOutcome(t *testing.T, what string, err error) {
	t.Helper()
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.BackendUnavailable || de.RetryAfterSeconds < 1 {
		t.Fatalf("%s: %v, want BACKEND_UNAVAILABLE with Retry-After", what, err)
	}
	if !strings.Contains(de.Message, "may or may not have been applied") || !strings.Contains(de.Message, "same Idempotency-Key") {
		t.Fatalf("%s: message %q does not say the outcome is unknown and that a retry is safe", what, de.Message)
	}
}

func TestWaitReplicas(t *testing.T) {
	master, replica := replicated(t)
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr(), DisableIdentity: true, ReadTimeout: 4 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	fromReplica := redis.NewClient(&redis.Options{Addr: replica.Addr(), DisableIdentity: true})
	t.Cleanup(func() { fromReplica.Close() })
	prefix := testenv.Isolate(t)
	s := durableStore(t, rdb, 1, prefix)

	t.Run("AcknowledgedWritesAreOnTheReplica", func(t *testing.T) {
		r, _, err := createWithKey(s, "acme", "k1")
		if err != nil {
			t.Fatal(err)
		}
		p := domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_a"}, ID: r.ID}
		if _, err := s.MarkProcessing(ctx, p, domain.ProgressInput{}); err != nil {
			t.Fatal(err)
		}
		done, err := s.Complete(ctx, p, domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"x":1}`)})
		if err != nil || done.Status != domain.StatusSucceeded {
			t.Fatalf("complete: %v %v", done, err)
		}
		// WAIT confirmed it, so the replica already serves the terminal state.
		keys, err := fromReplica.Keys(ctx, "*"+r.ID).Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("replica keys %v %v", keys, err)
		}
		if st, _ := fromReplica.GetRange(ctx, keys[0], 0, 0).Result(); st != "s" {
			t.Fatalf("replica has status %q, want s (succeeded)", st)
		}
		if err := s.Delete(ctx, "acme", r.ID); err != nil {
			t.Fatal(err)
		}
		if n, _ := fromReplica.Exists(ctx, keys[0]).Result(); n != 0 {
			t.Fatal("the delete was acknowledged before the replica had it")
		}
	})

	t.Run("ReplicaHungThenBack", func(t *testing.T) {
		before, _, err := createWithKey(s, "acme", "k-before")
		if err != nil {
			t.Fatal(err)
		}
		replica.Pause()
		start := time.Now()
		_, _, err = createWithKey(s, "acme", "k2")
		wantUnknownOutcome(t, "create while the replica is hung", err)
		if d := time.Since(start); d > 4*time.Second {
			t.Fatalf("the 503 took %s", d)
		}
		// Applied on the master, but not acknowledged: a retry replays it, and is
		// refused again for as long as the replica cannot confirm it.
		_, _, err = createWithKey(s, "acme", "k2")
		wantUnknownOutcome(t, "retried create while the replica is hung", err)
		// Also from a fresh connection, which never wrote: WAIT there would confirm
		// at once without the write barrier (durability.go).
		fresh := redis.NewClient(&redis.Options{Addr: master.Addr(), DisableIdentity: true, ReadTimeout: 4 * time.Second})
		defer fresh.Close()
		_, _, err = createWithKey(durableStore(t, fresh, 1, prefix), "acme", "k2")
		wantUnknownOutcome(t, "retried create from a fresh connection while the replica is hung", err)
		_, err = s.Cancel(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_a"}, ID: before.ID, IdemKey: "c1"}, domain.CancelInput{})
		wantUnknownOutcome(t, "cancel while the replica is hung", err)
		// That cancel is on the master, not confirmed: a 409 naming it would tell a
		// worker the request is over when a failover can still lose the cancel.
		complete := func() error {
			_, err := s.Complete(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_a"}, ID: before.ID},
				domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"x":1}`)})
			return err
		}
		if err := complete(); domain.ErrorCode(err) != domain.BackendUnavailable {
			t.Fatalf("complete after an unconfirmed cancel, while the replica is hung: %v, want BACKEND_UNAVAILABLE", err)
		}
		// Reads do not wait.
		if _, _, err := pollOf(s, "acme", before.ID, ""); err != nil {
			t.Fatalf("poll while the replica is hung: %v", err)
		}
		replica.Resume()
		r, replay, err := createWithKey(s, "acme", "k2")
		if err != nil || !replay {
			t.Fatalf("retry after the replica is back: %v replay=%v", err, replay)
		}
		c, err := s.Cancel(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_a"}, ID: before.ID, IdemKey: "c1"}, domain.CancelInput{})
		if err != nil || c.Status != domain.StatusCancelled {
			t.Fatalf("retried cancel: %v %v", c, err)
		}
		if err := complete(); domain.ErrorCode(err) != domain.AlreadyTerminal {
			t.Fatalf("complete after the confirmed cancel: %v, want ASYNC_REQUEST_ALREADY_TERMINAL", err)
		}
		// The replayed request is now also on the replica.
		keys, _ := fromReplica.Keys(ctx, "*"+r.ID).Result()
		if len(keys) != 1 {
			t.Fatalf("the replayed request is not on the replica: %v", keys)
		}
	})

	t.Run("ScriptCacheFlushed", func(t *testing.T) {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := createWithKey(s, "acme", "k3"); err != nil {
			t.Fatalf("create after SCRIPT FLUSH: %v", err)
		}
	})

	t.Run("NoReplica", func(t *testing.T) {
		replica.Stop()
		_, _, err := createWithKey(s, "acme", "k4")
		wantUnknownOutcome(t, "create with no replica", err)
	})
}

// TestWaitReplicasCluster runs the WAIT pipeline on the slot's master of the
// shared cluster (one replica per master): WAIT 1 passes, WAIT 2 cannot.
func TestWaitReplicasCluster(t *testing.T) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.Cluster(t), DisableIdentity: true})
	t.Cleanup(func() { rdb.Close() })
	s := durableStore(t, rdb, 1, testenv.Isolate(t))
	for _, tenant := range []string{"acme", "globex", "initech", "umbrella"} {
		r, _, err := createWithKey(s, tenant, "k")
		if err != nil {
			t.Fatalf("%s: create: %v", tenant, err)
		}
		if _, err := s.Fail(ctx, domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: "key_a"}, ID: r.ID},
			domain.FailInput{Failure: domain.FailureJSON("ERR_X", "x")}); err != nil {
			t.Fatalf("%s: fail: %v", tenant, err)
		}
		if err := s.Delete(ctx, tenant, r.ID); err != nil {
			t.Fatalf("%s: delete: %v", tenant, err)
		}
	}
	s2 := durableStore(t, rdb, 2, testenv.Isolate(t))
	_, _, err := createWithKey(s2, "acme", "k")
	wantUnknownOutcome(t, "WAIT 2 with one replica", err)
}

// TestHungRedisWriteOutcomeUnknown: without WAIT, a write to a Redis that stops
// answering is a 503 within the op timeout that says the outcome is unknown; a
// read is a plain 503.
func TestHungRedisWriteOutcomeUnknown(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(fmt.Sprintf("autopipeline=%v", ap), func(t *testing.T) {
			p := testenv.StartRedisProcess(t)
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), DisableIdentity: true, ReadTimeout: 300 * time.Millisecond,
				ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			s, err := store.New(rdb, store.Options{Prefix: testenv.Isolate(t), OpTimeout: 300 * time.Millisecond, AutoPipeline: ap})
			if err != nil {
				t.Fatal(err)
			}
			r, _, err := createWithKey(s, "acme", "k")
			if err != nil {
				t.Fatal(err)
			}
			p.Pause()
			defer p.Resume()
			start := time.Now()
			_, _, err = createWithKey(s, "acme", "k2")
			wantUnknownOutcome(t, "create on a hung Redis", err)
			_, _, err = pollOf(s, "acme", r.ID, "")
			if domain.ErrorCode(err) != domain.BackendUnavailable || strings.Contains(err.Error(), "may or may not") {
				t.Fatalf("poll on a hung Redis: %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("two calls took %s with a 300ms op timeout", d)
			}
			// and the store recovers by itself once Redis answers again
			p.Resume()
			pollUntil(t, s, r.ID, "no recovery after Redis came back", func(got *domain.Request) bool { return got.ID == r.ID })
		})
	}
}

// pollUntil reads request id of tenant acme until ok says yes, for up to 10 s.
func pollUntil(t *testing.T, s *store.Store, id, what string, ok func(*domain.Request) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _, err := pollOf(s, "acme", id, "")
		if err == nil && ok(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %+v %v", what, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
