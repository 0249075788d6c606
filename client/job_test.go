package client_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/client"
)

func TestRunJob(t *testing.T) {
	eachBackend(t, serviceOptions{}, func(t *testing.T, s *service) {
		ctx := context.Background()
		c := s.client(t, "rw")

		t.Run("Succeeds", func(t *testing.T) {
			cr := mustCreate(t, c, "job.test")
			var during *client.Request
			final, err := c.RunJob(ctx, cr.ID, func(ctx context.Context, p *client.Reporter) (client.Result, error) {
				p.Report(30, "reading")
				p.Report(70, "writing") // coalesced with the one before
				time.Sleep(300 * time.Millisecond)
				during, _ = c.Get(ctx, cr.ID)
				return &client.Answer{Value: map[string]int{"rows": 3}}, nil
			}, &client.JobOptions{ProgressInterval: 50 * time.Millisecond})
			if err != nil || final.Status != client.StatusSucceeded || final.ResultType != "answer" {
				t.Fatalf("%+v %v", final, err)
			}
			if during == nil || during.Status != client.StatusProcessing || during.Progress == nil ||
				*during.Progress.Percent != 70 || during.Progress.Message != "writing" {
				t.Fatalf("while running: %+v", during)
			}
			ev, _ := c.Events(ctx, cr.ID)
			if len(ev) != 3 || ev[1].To != client.StatusProcessing || ev[2].To != client.StatusSucceeded {
				t.Fatalf("events %+v", ev)
			}
		})
		t.Run("NilResultConfirms", func(t *testing.T) {
			cr := mustCreate(t, c, "job.test")
			final, err := c.RunJob(ctx, cr.ID, func(context.Context, *client.Reporter) (client.Result, error) { return nil, nil }, nil)
			if cf, _ := final.Confirmation(); err != nil || cf == nil || !cf.Confirmed {
				t.Fatalf("%+v %v", final, err)
			}
		})
		t.Run("Error", func(t *testing.T) {
			cr := mustCreate(t, c, "job.test")
			boom := errors.New("disk full")
			final, err := c.RunJob(ctx, cr.ID, func(context.Context, *client.Reporter) (client.Result, error) { return nil, boom }, nil)
			if !errors.Is(err, boom) || final.Status != client.StatusFailed || final.Failure.Code != "ERR_JOB_FAILED" ||
				final.Failure.Reason != "disk full" {
				t.Fatalf("%+v %v", final, err)
			}
			cr = mustCreate(t, c, "job.test")
			final, _ = c.RunJob(ctx, cr.ID, func(context.Context, *client.Reporter) (client.Result, error) {
				return nil, errors.Join(errors.New("wrapped"), &client.Failure{Code: "ERR_LEDGER", Reason: "down"})
			}, &client.JobOptions{FailCode: "ERR_OTHER"})
			if final.Failure.Code != "ERR_LEDGER" || final.Failure.Reason != "down" {
				t.Fatalf("failure %+v", final.Failure)
			}
		})
		t.Run("Panics", func(t *testing.T) {
			cr := mustCreate(t, c, "job.test")
			final, err := c.RunJob(ctx, cr.ID, func(context.Context, *client.Reporter) (client.Result, error) {
				var m map[string]int
				m["x"] = 1 // a nil map: panics
				return nil, nil
			}, nil)
			if err == nil || !strings.Contains(err.Error(), "panic: assignment to entry in nil map") || !strings.Contains(err.Error(), "job_test.go") {
				t.Fatalf("error %v", err)
			}
			if final.Status != client.StatusFailed || final.Failure.Code != "ERR_JOB_PANICKED" ||
				final.Failure.Reason != "panic: assignment to entry in nil map" {
				t.Fatalf("%+v", final.Failure)
			}
		})
		t.Run("CancelledWhileRunning", func(t *testing.T) {
			cr := mustCreate(t, c, "job.test")
			stopped := make(chan struct{})
			final, err := c.RunJob(ctx, cr.ID, func(ctx context.Context, p *client.Reporter) (client.Result, error) {
				if _, err := c.Cancel(context.Background(), cr.ID, "user gave up"); err != nil {
					return nil, err
				}
				p.Report(10, "still going") // this heartbeat finds the request cancelled
				<-ctx.Done()
				close(stopped)
				return nil, ctx.Err()
			}, &client.JobOptions{ProgressInterval: 10 * time.Millisecond})
			<-stopped
			if !errors.Is(err, client.ErrAlreadyTerminal) || final == nil || final.Status != client.StatusCancelled {
				t.Fatalf("%+v %v", final, err)
			}
		})
		t.Run("AlreadyTerminal", func(t *testing.T) {
			cr := mustCreate(t, c, "job.test")
			if _, err := c.Cancel(ctx, cr.ID, ""); err != nil {
				t.Fatal(err)
			}
			var ran atomic.Bool
			_, err := c.RunJob(ctx, cr.ID, func(context.Context, *client.Reporter) (client.Result, error) { ran.Store(true); return nil, nil }, nil)
			if !errors.Is(err, client.ErrAlreadyTerminal) || ran.Load() {
				t.Fatalf("%v, ran %v", err, ran.Load())
			}
		})
		t.Run("ContextEnds", func(t *testing.T) {
			cr := mustCreate(t, c, "job.test")
			jctx, cancel := context.WithCancel(ctx)
			_, err := c.RunJob(jctx, cr.ID, func(ctx context.Context, p *client.Reporter) (client.Result, error) {
				cancel()
				<-ctx.Done()
				return nil, ctx.Err()
			}, nil)
			if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			if r, _ := c.Get(ctx, cr.ID); r.Status != client.StatusProcessing {
				t.Fatalf("left %s, want processing", r.Status)
			}
		})
	})
}

// TestJobHeartbeatsOutliveProcessingTimeout: with processing_timeout 1s, a
// job that runs 2.5s succeeds because its heartbeats keep the request alive,
// while a request marked processing without heartbeats times out.
func TestJobHeartbeatsOutliveProcessingTimeout(t *testing.T) {
	eachBackend(t, serviceOptions{processingTimeout: time.Second, sweep: 100 * time.Millisecond}, func(t *testing.T, s *service) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := s.client(t, "rw")
		idle := mustCreate(t, c, "job.test")
		if _, err := c.MarkProcessing(ctx, idle.ID, nil); err != nil {
			t.Fatal(err)
		}
		cr := mustCreate(t, c, "job.test")
		final, err := c.RunJob(ctx, cr.ID, func(ctx context.Context, p *client.Reporter) (client.Result, error) {
			time.Sleep(2500 * time.Millisecond)
			return &client.Confirmation{Confirmed: true}, nil
		}, &client.JobOptions{HeartbeatInterval: 200 * time.Millisecond})
		if err != nil || final.Status != client.StatusSucceeded || final.Version < 5 {
			t.Fatalf("job: %+v %v", final, err)
		}
		r, err := c.Wait(ctx, idle.ID, nil)
		if err != nil || r.Status != client.StatusFailed || r.Failure.Code != "ERR_JOB_EXECUTION_TIMED_OUT" {
			t.Fatalf("the request without heartbeats: %+v %v", r, err)
		}
	})
}
