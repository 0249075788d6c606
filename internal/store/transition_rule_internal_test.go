package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestTransitionRule holds the lifecycle rule stated in Go (domain.Status.CanBecome)
// to what the transition script does, for every (from, to) pair, on every backend.
// Each target is tried by every operation the service has for it: the caller's
// transitions and the sweeper's timeouts (which act only from their guard status,
// once it is due; here always: the clock has passed every timeout). The rule
// allows a pair exactly when at least one of those operations applies; an
// applied one leaves the request in the target status with its version one
// higher, a refused one (ASYNC_REQUEST_ALREADY_TERMINAL for callers, nothing to
// do for the sweeper) leaves the record untouched.
func TestTransitionRule(t *testing.T) {
	ctx := context.Background()
	type op struct {
		name  string
		to    domain.Status
		apply func(s *Store, p domain.TransitionParams) (applied bool, err error)
	}
	caller := func(f func(*Store, domain.TransitionParams) (*domain.Request, error)) func(*Store, domain.TransitionParams) (bool, error) {
		return func(s *Store, p domain.TransitionParams) (bool, error) {
			_, err := f(s, p)
			if domain.ErrorCode(err) == domain.AlreadyTerminal {
				return false, nil
			}
			return err == nil, err
		}
	}
	ops := []op{
		{"processing", domain.StatusProcessing, caller(func(s *Store, p domain.TransitionParams) (*domain.Request, error) {
			return s.MarkProcessing(ctx, p, domain.ProgressInput{Progress: json.RawMessage(`{"percent":1}`)})
		})},
		{"complete", domain.StatusSucceeded, caller(func(s *Store, p domain.TransitionParams) (*domain.Request, error) {
			return s.Complete(ctx, p, domain.CompleteInput{ResultType: domain.ResultAnswer, Result: json.RawMessage(`{"v":1}`)})
		})},
		{"fail", domain.StatusFailed, caller(func(s *Store, p domain.TransitionParams) (*domain.Request, error) {
			return s.Fail(ctx, p, domain.FailInput{Failure: domain.FailureJSON("ERR_X", "")})
		})},
		{"cancel", domain.StatusCancelled, caller(func(s *Store, p domain.TransitionParams) (*domain.Request, error) {
			return s.Cancel(ctx, p, domain.CancelInput{Reason: "r"})
		})},
		{"queued timeout", domain.StatusExpired, func(s *Store, p domain.TransitionParams) (bool, error) {
			done, _, err := s.expireQueued(ctx, "", p.Tenant, p.ID)
			return done, err
		}},
		{"processing timeout", domain.StatusFailed, func(s *Store, p domain.TransitionParams) (bool, error) {
			return s.TimeOutProcessing(ctx, p.Tenant, p.ID)
		}},
	}
	// how to bring a new (queued) request into each status
	reach := map[domain.Status]op{domain.StatusQueued: {}}
	for _, o := range ops {
		if _, ok := reach[o.to]; !ok {
			reach[o.to] = o
		}
	}

	// queued is made by create only: no status may become it, and no
	// operation above targets it
	for _, from := range domain.Statuses {
		if from.CanBecome(domain.StatusQueued) {
			t.Errorf("CanBecome(%s, queued) = true; only a create makes a queued request", from)
		}
	}
	targets := map[domain.Status]bool{}
	for _, o := range ops {
		targets[o.to] = true
	}
	for _, to := range domain.Statuses {
		if to != domain.StatusQueued && !targets[to] {
			t.Fatalf("no operation targets %s: the pairs to it go unchecked", to)
		}
	}

	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			clock := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
			s, err := New(b.Client(t), Options{Prefix: testenv.Isolate(t), OpTimeout: 5 * time.Second,
				QueuedTimeout: time.Minute, ProcessingTimeout: time.Minute, Retention: time.Hour,
				Now: clock.Now, AutoPipeline: b.AutoPipeline})
			if err != nil {
				t.Fatal(err)
			}
			get := func(id string) *domain.Request {
				t.Helper()
				res, err := s.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: "acme"}, ID: id})
				if err != nil {
					t.Fatalf("read %s: %v", id, err)
				}
				return res.Request
			}
			for _, from := range domain.Statuses {
				reached := map[domain.Status]bool{}
				for _, o := range ops {
					r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "acme", By: "key_a"}, Input: domain.CreateInput{Type: "x"}})
					if err != nil {
						t.Fatal(err)
					}
					p := domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_w"}, ID: r.ID}
					if from != domain.StatusQueued {
						clock.Add(2 * time.Minute) // past the queued timeout, for expired
						if ok, err := reach[from].apply(s, p); !ok || err != nil {
							t.Fatalf("bring %s to %s: %v %v", r.ID, from, ok, err)
						}
					}
					before := get(r.ID)
					if before.Status != from {
						t.Fatalf("set-up: %s, want %s", before.Status, from)
					}
					clock.Add(2 * time.Minute) // past every timeout
					applied, err := o.apply(s, p)
					if err != nil {
						t.Fatalf("%s from %s: %v", o.name, from, err)
					}
					after := get(r.ID)
					switch {
					case applied && !from.CanBecome(o.to):
						t.Errorf("%s -> %s applied (%s), but CanBecome says no", from, o.to, o.name)
					case applied && (after.Status != o.to || after.Version != before.Version+1):
						t.Errorf("%s -> %s (%s): now %s version %d (was %d)", from, o.to, o.name, after.Status, after.Version, before.Version)
					case !applied && (after.Status != from || after.Version != before.Version):
						t.Errorf("%s -> %s (%s) refused but the record changed: %s version %d (was %d)", from, o.to, o.name, after.Status, after.Version, before.Version)
					}
					reached[o.to] = reached[o.to] || applied
				}
				for to := range targets {
					if reached[to] != from.CanBecome(to) {
						t.Errorf("%s -> %s: the service applies it: %v; CanBecome says %v", from, to, reached[to], from.CanBecome(to))
					}
				}
			}
		})
	}
}
