package httpapi

import (
	"context"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/asyncstatus/asyncstatus/internal/defaults"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Waits follows requests for long polls and event streams (docs/reference.md §12): the
// store's notification hub (store.Hub) in serve.
type Waits interface {
	// Watch returns once a change of (tenant, id) made after it returns cannot
	// be missed; BACKEND_UNAVAILABLE while that cannot be promised.
	Watch(ctx context.Context, tenant, id string) (domain.Watch, error)
}

// WaitOptions tune waiting (config wait.*).
type WaitOptions struct {
	// Max bounds Prefer: wait=N (whole seconds). default: 25s.
	Max time.Duration
	// MaxWaiters bounds the long polls and streams held at once; past it a long
	// poll is an ordinary poll. 0: no wait is held (Options.Waits nil does the
	// same). default: 0.
	MaxWaiters int
	// MaxWaitersPerTenant and MaxWaitersPerCredential bound the waits one
	// tenant, and one API key or poll token, may hold at once (shares.go);
	// past them a wait is answered as past MaxWaiters. 0: no share.
	// default: 0.
	MaxWaitersPerTenant, MaxWaitersPerCredential int
	// Heartbeat: a stream's keep-alive interval, and how often a held long poll
	// checks that its client is still there. default: 15s.
	Heartbeat time.Duration
	// StreamMax ends a stream after this long. default: 10m.
	StreamMax time.Duration
	// ReadTimeout bounds the last read of a wait (the store's op timeout).
	// default: 1s.
	ReadTimeout time.Duration
}

func (o *WaitOptions) defaults() {
	if o.Max < time.Second {
		o.Max = defaults.WaitMax
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaults.WaitHeartbeat
	}
	if o.StreamMax <= 0 {
		o.StreamMax = defaults.StreamMax
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = defaults.OpTimeout
	}
}

// StopWaits answers every held long poll at once with the current state and
// ends every stream, and makes new ones answer at once: the first step of a
// shutdown, before the listener's ShutdownWithTimeout waits for answers.
// It returns once every parked long poll has written its answer.
func (s *Server) StopWaits() {
	s.stopOnce.Do(func() {
		s.parkMu.Lock()
		close(s.stopping)
		s.parkMu.Unlock()
	})
	s.parkedWaits.Wait()
}

// appliedWait clamps a wait preference into 1..wait.max seconds.
func (s *Server) appliedWait(n int) int {
	return min(max(n, 1), int(s.opts.Wait.Max/time.Second))
}

// firstRead is a wait's first read, made once the watch is live: it counts
// against the read rate limits (once for the whole wait), unpaced.
func (s *Server) firstRead(c *fiber.Ctx) (*domain.Request, error) {
	res, err := s.reqs.Poll(c.UserContext(), s.pollParams(c, false))
	return res.Request, err
}

// watch starts following the caller's request for a wait: a slot, then the
// hub's watch, and the slot to release when done. sl nil: answer as an
// ordinary poll (cap or share reached, stopping, or Redis away); err: answer
// the error (the id cannot exist).
func (s *Server) watch(c *fiber.Ctx) (wa domain.Watch, sl *slot, err error) {
	p := principal(c)
	if sl = s.holdSlot(p); sl == nil {
		s.opts.Metrics.WaitCapped()
		return nil, nil, nil
	}
	wa, err = s.opts.Waits.Watch(c.UserContext(), p.Tenant, pathID(c))
	if err != nil {
		s.releaseSlot(sl)
		if domain.ErrorCode(err) == domain.NotFound {
			return nil, nil, err
		}
		return nil, nil, nil
	}
	return wa, sl, nil
}

// longPoll answers GET /v1/requests/{id} with Prefer: wait=n (docs/reference.md §12). A
// wait that has to wait is parked (park.go); the rest answer at once.
func (s *Server) longPoll(c *fiber.Ctx, n int, v view) error {
	wa, sl, err := s.watch(c)
	if err != nil {
		return err
	}
	if sl == nil {
		return s.pacedPoll(c, v)
	}
	r, err := s.firstRead(c)
	applied := s.appliedWait(n)
	match := c.Get(fiber.HeaderIfNoneMatch)
	if err == nil && !r.Done && (match == "" || etagMatches(match, r.Version)) && s.park(c, wa, sl, r, applied, match, v) {
		return nil
	}
	wa.Close()
	s.releaseSlot(sl)
	if err != nil {
		return err
	}
	return s.answerWait(c, r, applied, match, v)
}

// answerWait answers a long poll with r: 200 with its view v, or 304 while
// If-None-Match (match) still matches.
func (s *Server) answerWait(c *fiber.Ctx, r *domain.Request, applied int, match string, v view) error {
	var b [32]byte
	c.Response().Header.Set("Preference-Applied", string(strconv.AppendInt(append(b[:0], "wait="...), int64(applied), 10)))
	if !r.Done {
		retryAfter(c, 0) // the caller may wait again at once
	}
	if match != "" && etagMatches(match, r.Version) {
		return notModified(c, r.Version)
	}
	return s.writeView(c, v, r)
}

// waitFor holds a wait until r's version changes, its time (hw) is up, or
// the server stops, and returns the request as it is then. Its last read is
// made after the time is up, so a change whose announcement was lost still
// answers. gone: the client went away (found within one heartbeat); nobody
// reads the answer.
func (s *Server) waitFor(wa domain.Watch, hw *heldWait, r *domain.Request) (_ *domain.Request, gone bool, _ error) {
	// A re-read that failed (Redis slow or away for a moment) was to deliver a
	// change: read again soon, backing off to once a second, rather than leave
	// the change to the wait's end (found by internal/histories: long polls
	// answered at their timer, the change 0.1 s after they began).
	var reread <-chan time.Time
	backoff := rereadFirst
	for {
		select {
		case <-reread:
			reread = nil
			wa.Refresh()
		case snap := <-wa.Changes():
			if snap.Err != nil {
				if domain.ErrorCode(snap.Err) == domain.NotFound {
					return nil, false, snap.Err
				}
				if reread == nil {
					reread = time.After(backoff)
					backoff = min(2*backoff, rereadMax)
				}
				continue
			}
			backoff = rereadFirst
			if snap.Request.Version != r.Version || snap.Request.Done {
				return snap.Request, false, nil
			}
		case <-hw.end:
			s.clock.mu.Lock()
			gone := hw.gone
			s.clock.mu.Unlock()
			if gone {
				return r, true, nil
			}
			r, err := s.lastRead(wa)
			return r, false, err
		case <-s.stopping:
			r, err := s.lastRead(wa)
			return r, false, err
		}
	}
}

// The pauses before a held wait reads again after a failed read.
const (
	rereadFirst = 100 * time.Millisecond
	rereadMax   = time.Second
)

func (s *Server) lastRead(wa domain.Watch) (*domain.Request, error) {
	snap := domain.FinalRead(wa, s.opts.Wait.ReadTimeout)
	return snap.Request, snap.Err
}

// Waiting is the number of long polls and streams held now.
func (s *Server) Waiting() int { return int(s.held.Load()) }
