package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"time"
)

// WatchOptions tune Watch. The filters are the list's that apply to a change.
type WatchOptions struct {
	// Type keeps changes of requests of this type.
	Type string
	// Statuses keeps changes that left the request in one of these statuses.
	Statuses []Status
	// Labels keeps changes of requests carrying every one of these labels
	// (at most 4): the label_selector.
	Labels map[string]string
	// LastEventID resumes a watch after the event whose ID this is (from an
	// earlier Watch): every change after it comes first, none twice, if it is
	// younger than the service's wait.replay_window (10m by default);
	// otherwise the first event is a reset. default: "", live changes only.
	LastEventID string
	// MaxBackoff caps the jittered, doubling backoff between reconnections
	// after errors. default: 30s.
	MaxBackoff time.Duration
	// MaxErrors is how many failed connections in a row (transport errors,
	// 429, 503, a watch the service could not hold) end the watch with an
	// error. default: 10.
	MaxErrors int
}

// WatchEvent is one event of a watch.
type WatchEvent struct {
	// ID is the watch's position after this event: pass it as
	// WatchOptions.LastEventID to resume from here later.
	ID string
	// Request is the request as the change left it; nil for a reset.
	Request *Request
	// Reset says the service no longer holds every change since the position
	// the watch resumed from: list again (List), then go on with the events
	// that follow.
	Reset bool
}

// Watch follows every change of the tenant's requests that the filters keep
// (GET /v1/requests?watch=true, read scope, docs/reference.md §16): each
// create, transition and heartbeat, made on any replica, as an event, in
// each request's order. It reconnects by itself when the service ends the
// stream (wait.stream_max) or the connection drops, resuming with
// Last-Event-ID, so no change is missed and none repeated; when the service
// can no longer replay what was missed, the next event is a reset.
//
// The iteration ends when the caller stops it, when ctx is done (yielding
// ctx's error), or with an error answer other than 429 and 503, or after
// MaxErrors failed connections in a row (yielding the error).
func (c *Client) Watch(ctx context.Context, o WatchOptions) iter.Seq2[*WatchEvent, error] {
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.MaxErrors <= 0 {
		o.MaxErrors = 10
	}
	return func(yield func(*WatchEvent, error) bool) {
		pace := RetryPolicy{MinBackoff: c.retry.MinBackoff, MaxBackoff: o.MaxBackoff}.withDefaults()
		s := &watchState{lastID: o.LastEventID, reconnect: 2 * time.Second}
		errs := 0
		for {
			got, stop, err := c.watchOnce(ctx, o, s, yield)
			if stop {
				return
			}
			if ctx.Err() != nil {
				yield(nil, fmt.Errorf("watch requests: %w", ctx.Err()))
				return
			}
			var e *Error
			if errors.As(err, &e) && e.Status != http.StatusTooManyRequests && e.Status != http.StatusServiceUnavailable {
				yield(nil, fmt.Errorf("watch requests: %w", err))
				return
			}
			delay := s.reconnect
			if err == nil && got > 0 {
				errs = 0 // a watch that ended cleanly (wait.stream_max): resume
			} else {
				// an error, or a watch the service did not hold (no wait
				// slot, or Redis away): it says retry and ends
				errs++
				if errs >= o.MaxErrors {
					if err == nil {
						err = errors.New("the service did not hold the watch")
					}
					yield(nil, fmt.Errorf("watch requests: %w", err))
					return
				}
				ra := time.Duration(0)
				if e != nil {
					ra = e.RetryAfter
				}
				delay = max(delay, pace.backoff(errs, 0), ra)
			}
			if err := sleep(ctx, delay); err != nil {
				yield(nil, fmt.Errorf("watch requests: %w", err))
				return
			}
		}
	}
}

// watchState is what survives a reconnection.
type watchState struct {
	lastID    string
	reconnect time.Duration
}

// watchOnce reads one connection's events; got counts the events it brought
// (keep-alives do not count), stop that the caller stopped the iteration.
func (c *Client) watchOnce(ctx context.Context, o WatchOptions, s *watchState, yield func(*WatchEvent, error) bool) (got int, stop bool, err error) {
	lo := ListOptions{Type: o.Type, Statuses: o.Statuses, Labels: o.Labels}
	q := lo.query()
	q.Set("watch", "true")
	h := http.Header{"Cache-Control": {"no-store"}}
	if s.lastID != "" {
		h.Set("Last-Event-ID", s.lastID)
	}
	// The stream lives as long as ctx; a cancelled iteration ends it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res, err := c.send(ctx, &call{method: http.MethodGet, path: "/v1/requests", query: q, header: h}, nil, "text/event-stream")
	if err != nil {
		return 0, false, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return 0, false, problemError(res, b)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return 0, false, fmt.Errorf("watch answered %q, not text/event-stream", ct)
	}
	r := newSSEReader(res.Body)
	for {
		ev, err := r.Next()
		if r.retry > 0 {
			s.reconnect = r.retry
		}
		if r.lastID != "" {
			// also an id with no event: the service moves a filtered
			// watch's position past changes the filter dropped
			s.lastID = r.lastID
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return got, false, err
		}
		var we *WatchEvent
		switch ev.Event {
		case "reset":
			we = &WatchEvent{ID: ev.ID, Reset: true}
		case "request", "":
			var rq Request
			if err := json.Unmarshal([]byte(ev.Data), &rq); err != nil {
				return got, false, fmt.Errorf("decode event %s: %w", ev.ID, err)
			}
			we = &WatchEvent{ID: ev.ID, Request: &rq}
		default:
			s.lastID = ev.ID
			continue // an event type of a later version of the API
		}
		got++
		s.lastID = ev.ID
		if !yield(we, nil) {
			return got, true, nil
		}
	}
}
