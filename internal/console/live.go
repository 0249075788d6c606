package console

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Live views are console-side event streams (text/event-stream) authenticated
// by the session cookie: the public stream of §12 would need a poll token or
// an API key, which a page must not hold. Each event's data is the page's live
// part rendered by the same template as the page, so the script only swaps it
// in, and the page without a script shows the same thing.

// heartbeat is how often a quiet stream sends a comment, which is also how a
// gone browser is noticed.
const heartbeat = 15 * time.Second

// stream runs an event stream: next is called at once and then every
// LiveInterval; it returns the fragment to send ("" when nothing changed) and
// whether the stream is done (sent last).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, v *view, next func() (string, bool, error)) {
	fl, ok := w.(http.Flusher)
	if !ok {
		s.refuseAs(w, r, v, http.StatusInternalServerError, "INTERNAL", "Streaming is not supported here.")
		return
	}
	first, done, err := next()
	if err != nil {
		s.failed(w, r, v, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	send := func(frag string) {
		fmt.Fprint(w, "event: fragment\n")
		for _, line := range strings.Split(frag, "\n") {
			fmt.Fprintf(w, "data: %s\n", line)
		}
		fmt.Fprint(w, "\n")
		fl.Flush()
	}
	if first != "" {
		send(first)
	}
	fl.Flush()
	tick := time.NewTicker(s.opts.LiveInterval)
	defer tick.Stop()
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
		case <-tick.C:
			var frag string
			frag, done, err = next()
			if err != nil {
				// the stream ends; the browser reconnects and the page shows why
				return
			}
			if frag != "" {
				send(frag)
			}
		}
	}
}

// requestLive streams the request page's live part whenever the request's
// version changes, and ends after its terminal state.
func (s *Server) requestLive(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("id")
	p := "/t/" + v.Tenant + "/requests/" + id
	var version int64 = -1
	s.stream(w, r, v, func() (string, bool, error) {
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
	s.stream(w, r, v, func() (string, bool, error) {
		frag, err := s.fragment("figures", "live", &view{Data: s.figs.figures()})
		return frag, false, err
	})
}
