package client

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"
)

// JobFunc is the work of one request. It reports progress through p and
// returns the request's result (a *Link, *Confirmation or *Answer; nil means
// &Confirmation{Confirmed: true}) or an error. A *Failure error (or one that
// wraps it) fails the request with its code; any other error fails it with
// JobOptions.FailCode and the error's text as the reason.
//
// ctx is cancelled when RunJob's context is, and when the request became
// terminal meanwhile (cancelled by a user, or timed out): stop then.
type JobFunc func(ctx context.Context, p *Reporter) (Result, error)

// JobOptions tune RunJob. A nil *JobOptions takes every default.
type JobOptions struct {
	// HeartbeatInterval is how often a heartbeat keeps the request alive while
	// the function runs. It must stay well below the service's
	// lifecycle.processing_timeout (15m by default), after which a request
	// without a heartbeat fails with ERR_JOB_EXECUTION_TIMED_OUT; a heartbeat
	// that fails is retried at the next tick. default: 1m.
	HeartbeatInterval time.Duration
	// ProgressInterval is the least time between two progress reports sent
	// to the service: Reporter.Report only records the latest, and it leaves
	// with the next heartbeat or after this interval, whichever comes first.
	// default: 1s.
	ProgressInterval time.Duration
	// FailCode is the failure code of an error that is not a *Failure.
	// default: "ERR_JOB_FAILED".
	FailCode string
	// PanicCode is the failure code of a function that panicked; the reason is
	// the panic's value. default: "ERR_JOB_PANICKED".
	PanicCode string
	// OnError receives the errors of heartbeats (the job goes on). default: nil.
	OnError func(error)
}

// Reporter reports a job's progress. Its methods are safe for concurrent use.
type Reporter struct {
	mu      sync.Mutex
	pending *Progress
	wake    chan struct{}
}

// Report records the job's progress (percent 0..100, message at most 256
// characters); it is sent soon, coalesced with later reports.
func (p *Reporter) Report(percent int, message string) {
	p.mu.Lock()
	p.pending = NewProgress(min(max(percent, 0), 100), message)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *Reporter) take() *Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.pending
	p.pending = nil
	return pr
}

// RunJob runs fn as the work of request id: it marks the request processing,
// sends heartbeats every HeartbeatInterval while fn runs (with the progress fn
// reports), then completes the request with fn's result or fails it with fn's
// error; a panic in fn is recovered and fails the request with PanicCode.
// Every call carries its own Idempotency-Key, so the retries of a call are safe.
//
// It returns the request's final state, and the error of fn (or of the panic)
// when the request was failed because of it. When the request is already
// terminal (cancelled before the job started, or while it ran), fn is not
// started, or its context is cancelled, and RunJob returns an error matching
// ErrAlreadyTerminal with the request as it is. When RunJob's own context ends
// first, nothing more is sent (the request stays processing, for a retry of
// the job or for the processing timeout) and the context's error is returned.
func (c *Client) RunJob(ctx context.Context, id string, fn JobFunc, opts *JobOptions) (*Request, error) {
	var o JobOptions
	if opts != nil {
		o = *opts
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = time.Minute
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = time.Second
	}
	if o.FailCode == "" {
		o.FailCode = "ERR_JOB_FAILED"
	}
	if o.PanicCode == "" {
		o.PanicCode = "ERR_JOB_PANICKED"
	}
	if _, err := c.MarkProcessing(ctx, id, nil); err != nil {
		return nil, fmt.Errorf("run job: %w", err)
	}

	workCtx, stop := context.WithCancel(ctx)
	defer stop()
	rep := &Reporter{wake: make(chan struct{}, 1)}
	type outcome struct {
		res      Result
		err      error
		panicked bool
		stack    []byte
	}
	done := make(chan outcome, 1)
	go func() {
		var out outcome
		defer func() {
			if v := recover(); v != nil {
				out = outcome{err: fmt.Errorf("panic: %v", v), panicked: true, stack: debug.Stack()}
			}
			done <- out
		}()
		out.res, out.err = fn(workCtx, rep)
	}()

	// The heartbeat loop: one tick per interval, and a progress report at
	// most every ProgressInterval.
	beat := time.NewTicker(o.HeartbeatInterval)
	defer beat.Stop()
	var terminal error // set when a heartbeat finds the request terminal
	lastSent := time.Now()
	var progressDue <-chan time.Time
	send := func() {
		if terminal != nil {
			return
		}
		pr := rep.take()
		_, err := c.Heartbeat(workCtx, id, pr)
		lastSent = time.Now()
		switch {
		case err == nil:
		case errors.Is(err, ErrAlreadyTerminal):
			terminal = err
			stop()
		case workCtx.Err() == nil && o.OnError != nil:
			o.OnError(err)
		}
	}
	var out outcome
wait:
	for {
		select {
		case out = <-done:
			break wait
		case <-beat.C:
			send()
		case <-rep.wake:
			if progressDue == nil {
				progressDue = time.After(max(0, o.ProgressInterval-time.Since(lastSent)))
			}
		case <-progressDue:
			progressDue = nil
			send()
		}
	}
	if terminal != nil {
		return alreadyTerminal(terminal), fmt.Errorf("run job %s: %w", id, terminal)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("run job %s: %w", id, ctx.Err())
	}
	var (
		final *Request
		err   error
	)
	var f *Failure
	switch {
	case out.panicked:
		final, err = c.Fail(ctx, id, o.PanicCode, truncate(out.err.Error(), 1024))
	case errors.As(out.err, &f):
		final, err = c.Fail(ctx, id, f.Code, truncate(f.Reason, 1024))
	case out.err != nil:
		final, err = c.Fail(ctx, id, o.FailCode, truncate(out.err.Error(), 1024))
	default:
		res := out.res
		if res == nil {
			res = &Confirmation{Confirmed: true}
		}
		final, err = c.Complete(ctx, id, res)
	}
	if err != nil {
		if errors.Is(err, ErrAlreadyTerminal) {
			return alreadyTerminal(err), fmt.Errorf("run job %s: %w", id, err)
		}
		return nil, fmt.Errorf("run job %s: %w", id, err)
	}
	switch {
	case out.panicked: // the stack is for the job's own log, not for the request's readers
		return final, fmt.Errorf("run job %s: %w\n%s", id, out.err, out.stack)
	case out.err != nil:
		return final, fmt.Errorf("run job %s: %w", id, out.err)
	}
	return final, nil
}

// alreadyTerminal is the request an ASYNC_REQUEST_ALREADY_TERMINAL error carries.
func alreadyTerminal(err error) *Request {
	var e *Error
	if errors.As(err, &e) {
		return e.Request
	}
	return nil
}

// truncate cuts s to at most n characters (the service counts characters).
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}
