package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/sse"
)

// Watcher follows a request's changes (the store's notification hub, docs/reference.md §12).
type Watcher interface {
	Watch(ctx context.Context, tenant, id string) (domain.Watch, error)
}

// Live views are console-side event streams (text/event-stream) authenticated
// by the session cookie: the public stream of docs/reference.md §12 would need a poll token or
// an API key, which a page must not hold. Each event's data is the page's live
// part rendered by the same template as the page, so the script only swaps it
// in, and the page without a script shows the same thing.

// heartbeat is how often a quiet stream sends a comment, which is also how a
// gone browser is noticed.
const heartbeat = 15 * time.Second

// stream runs an event stream: next is called at once (with nil), then with
// every snapshot from changes, or, when changes is nil, every LiveInterval
// (with nil); it returns the fragment to send ("" when nothing changed) and
// whether the stream is done (sent last).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, v *view, changes <-chan domain.Snapshot,
	next func(*domain.Snapshot) (string, bool, error)) {
	fl, ok := w.(http.Flusher)
	if !ok {
		s.refuseAs(w, r, v, http.StatusInternalServerError, "INTERNAL", "Streaming is not supported here.")
		return
	}
	first, done, err := next(nil)
	if err != nil {
		s.failed(w, r, v, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	var buf []byte
	send := func(frag string) {
		// A fragment holds tenants' text (a progress message); a CR in it
		// must not end the data line, as it would if only LF split it.
		buf = append(buf[:0], "event: fragment\n"...)
		buf = append(sse.AppendDataString(buf, frag), '\n')
		_, _ = w.Write(buf)
		fl.Flush()
	}
	if first != "" {
		send(first)
	}
	fl.Flush()
	var ticks <-chan time.Time
	if changes == nil {
		tick := time.NewTicker(s.opts.LiveInterval)
		defer tick.Stop()
		ticks = tick.C
	}
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	end := time.NewTimer(s.opts.LiveMax)
	defer end.Stop()
	for !done {
		select {
		case <-r.Context().Done():
			return
		case <-end.C:
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		case <-ticks:
			if done = s.advance(send, next, nil); done {
				return
			}
		case snap := <-changes:
			if done = s.advance(send, next, &snap); done {
				return
			}
		}
	}
}

// advance sends what next makes of a wake-up; true ends the stream (after
// the last state, or an error: the browser reconnects and the page shows why).
func (s *Server) advance(send func(string), next func(*domain.Snapshot) (string, bool, error), snap *domain.Snapshot) bool {
	frag, done, err := next(snap)
	if err != nil {
		return true
	}
	if frag != "" {
		send(frag)
	}
	return done
}

// requestLive streams the request page's live part whenever the request's
// version changes, and ends after its terminal state. With the store's
// notification hub (Options.Watcher) it is woken by each change, on whichever
// replica it was made; without one (or while the hub cannot subscribe) it
// re-reads every LiveInterval.
func (s *Server) requestLive(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("id")
	p := "/t/" + v.Tenant + "/requests/" + id
	var changes <-chan domain.Snapshot
	if s.opts.Watcher != nil {
		// watched before the first read, so that no change falls between them
		wa, err := s.opts.Watcher.Watch(r.Context(), v.Tenant, id)
		if err != nil {
			s.log.Warn("console: cannot watch the request; its live view re-reads instead", "id", id, "err", err)
		} else {
			defer wa.Close()
			changes = wa.Changes()
		}
	}
	var version int64 = -1
	s.stream(w, r, v, changes, func(snap *domain.Snapshot) (string, bool, error) {
		if snap != nil {
			if snap.Err != nil {
				return "", true, snap.Err
			}
			if snap.Request != nil && snap.Request.Version == version {
				return "", false, nil
			}
		}
		// the hub's snapshot has no events: the timeline needs a read with them
		req, err := s.read(r.Context(), v.Tenant, id)
		if err != nil {
			return "", true, err
		}
		if req.Version == version {
			return "", false, nil
		}
		version = req.Version
		frag, err := s.fragment("request", "live", &view{Tenant: v.Tenant, Data: requestView{Req: req, Path: p}})
		return frag, req.Status.Terminal(), err
	})
}

// figuresLive streams the figures every LiveInterval.
func (s *Server) figuresLive(w http.ResponseWriter, r *http.Request, v *view) {
	s.stream(w, r, v, nil, func(*domain.Snapshot) (string, bool, error) {
		frag, err := s.fragment("figures", "live", &view{Data: s.figs.figures()})
		return frag, false, err
	})
}
