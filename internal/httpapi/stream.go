package httpapi

import (
	"bufio"
	"net"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// queryPollToken is the query parameter that carries a poll token on the
// stream route, and only there: EventSource cannot send headers.
const queryPollToken = "poll_token"

// streamHeaders marks every answer of the stream route, errors included: its
// URL may carry a poll token, which no Referer may repeat.
func streamHeaders(c *fiber.Ctx) error {
	c.Set("Referrer-Policy", "no-referrer")
	return c.Next()
}

// authedStream is authedPoll that also takes ?poll_token= when no other
// credential is sent.
func (s *Server) authedStream() fiber.Handler {
	next := s.authedPoll()
	return func(c *fiber.Ctx) error {
		h := &c.Request().Header
		if len(h.Peek(fiber.HeaderAuthorization)) == 0 && len(h.Peek(headerPollTok)) == 0 {
			if tok := c.Context().QueryArgs().Peek(queryPollToken); len(tok) > 0 {
				h.SetBytesV(headerPollTok, tok)
			}
		}
		return next(c)
	}
}

// stream answers GET /v1/requests/{id}/stream (docs/reference.md §12): text/event-stream,
// one event per state from the current one on, until the terminal one. Its
// errors before the first byte are the ordinary problem+json answers.
func (s *Server) stream(c *fiber.Ctx) error {
	wa, held, err := s.watch(c)
	if err != nil {
		return err
	}
	release := func() {
		if held {
			wa.Close()
			s.releaseSlot()
		}
	}
	r, err := s.firstRead(c)
	if err != nil {
		release()
		return err
	}
	last := c.Get("Last-Event-ID")
	current := strconv.FormatInt(r.Version, 10)
	if r.Done && last == current {
		// The client saw the end already; 204 is what makes EventSource stop
		// reconnecting (HTML's "fail the connection").
		release()
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.SendStatus(fiber.StatusNoContent)
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no") // reverse proxies: do not hold events back
	sw := &sseWriter{conn: c.Context().Conn(), timeout: s.streamWriteTimeout()}
	if last == current {
		sw.sent = r.Version
	}
	// Runs after this handler returns, when c is no longer ours: everything it
	// needs is captured here.
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		sw.w = w
		if held {
			s.opts.Metrics.StreamOpen(1)
			defer s.opts.Metrics.StreamOpen(-1)
			defer release()
		}
		s.runStream(sw, wa, r)
	})
	return nil
}

// streamWriteTimeout bounds each write of a stream: fasthttp sets its
// WriteTimeout once per answer, which a stream outlives, so the stream moves
// the deadline on before every write.
func (s *Server) streamWriteTimeout() time.Duration {
	if s.opts.WriteTimeout > 0 {
		return s.opts.WriteTimeout
	}
	return 10 * time.Second
}

// runStream writes the events of one stream. wa is nil when no slot was
// free: the client gets the current state and resumes later.
func (s *Server) runStream(sw *sseWriter, wa domain.Watch, r *domain.Request) {
	sw.raw("retry: 2000\n\n")
	if !sw.event(r) || r.Done || wa == nil {
		return
	}
	// Both ends of a stream's time come from the shared beat: it ends at the
	// first beat after wait.stream_max.
	end := time.Now().Add(s.opts.Wait.StreamMax)
	beat := s.beats.join()
	defer s.beats.leave()
	for {
		select {
		case snap := <-wa.Changes():
			if snap.Err != nil {
				return // gone (retention, delete), frozen, or Redis away: the client resumes or learns why
			}
			if !sw.event(snap.Request) || snap.Request.Done {
				return
			}
		case <-beat:
			beat = s.beats.next()
			if !time.Now().Before(end) {
				return
			}
			// the write is what tells that the client left
			if !sw.raw(": keep-alive\n\n") {
				return
			}
		case <-s.stopping:
			return
		}
	}
}

// sseWriter writes Server-Sent Events on a stream's connection.
type sseWriter struct {
	w       *bufio.Writer
	conn    net.Conn
	timeout time.Duration
	sent    int64 // the version of the last event written
	buf     []byte
}

// event writes r as an event unless its version was already sent, and
// flushes; false when the client is gone.
func (sw *sseWriter) event(r *domain.Request) bool {
	if r.Version <= sw.sent {
		return true
	}
	b := append(sw.buf[:0], "id: "...)
	b = strconv.AppendInt(b, r.Version, 10)
	b = append(b, "\nevent: request\ndata: "...)
	b, err := wire.AppendRequest(b, r) // one line: JSON escapes every newline
	if err != nil {
		return false
	}
	b = append(b, "\n\n"...)
	sw.buf = b
	sw.sent = r.Version
	return sw.flush(b)
}

func (sw *sseWriter) raw(s string) bool { return sw.flush([]byte(s)) }

func (sw *sseWriter) flush(b []byte) bool {
	if sw.conn != nil {
		_ = sw.conn.SetWriteDeadline(time.Now().Add(sw.timeout))
	}
	if _, err := sw.w.Write(b); err != nil {
		return false
	}
	return sw.w.Flush() == nil
}
