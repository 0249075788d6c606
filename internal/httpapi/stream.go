package httpapi

import (
	"bytes"
	"net"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/sse"
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
	wa, sl, err := s.watch(c)
	if err != nil {
		return err
	}
	held := sl != nil
	release := func() {
		if held {
			wa.Close()
			s.releaseSlot(sl)
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
	if c.Context().IsHead() {
		release()
		return nil
	}
	sw := &sseWriter{timeout: s.streamWriteTimeout()}
	if last == current {
		sw.sent = r.Version
	}
	sw.frameFirst(r)
	done := r.Done // the stream keeps no copy of the request it framed
	if !s.detachStream(c, sw, func() {
		if held {
			s.opts.Metrics.StreamOpen(1)
			defer s.opts.Metrics.StreamOpen(-1)
			defer release()
		}
		s.runStream(sw, wa, done)
	}) {
		release() // stopping: the current state, and the end
		c.Set(fiber.HeaderConnection, "close")
		return c.SendString(string(sw.firstBody))
	}
	return nil
}

// detachStream hands the connection of c to a goroutine of the stream's own
// (Hijack), as park does for a long poll, so that neither fasthttp's worker
// goroutine, its read buffer and request context, nor the pipe and extra
// goroutine of its body stream writer stay with a stream for its ten
// minutes: the stream writes its chunks on the socket itself. run writes
// the headers set so far with the first chunk (sw.first), then the rest;
// then the chunked body is ended and the connection closed (Connection:
// close: the client's next call opens a new one). false once the server is
// stopping.
func (s *Server) detachStream(c *fiber.Ctx, sw *sseWriter, run func()) bool {
	s.parkMu.Lock()
	select {
	case <-s.stopping:
		s.parkMu.Unlock()
		return false
	default:
	}
	s.parkedWaits.Add(1) // StopWaits waits for streams too: they end at once
	s.parkMu.Unlock()
	rc := c.Context()
	sw.conn = rc.Conn()
	boundSendBuffer(sw.conn) // stream_socket.go
	var h fasthttp.ResponseHeader
	s.writeRate(c) // the stream is written later, with the headers set now
	rc.Response.Header.CopyTo(&h)
	h.SetStatusCode(fiber.StatusOK)
	h.SetContentLength(-1) // chunked
	h.SetConnectionClose()
	h.Set(fiber.HeaderDate, string(fasthttp.AppendHTTPDate(nil, time.Now())))
	// one write for the headers and the first chunk, in a slice of its own
	sw.first = append(append([]byte(nil), h.Header()...), sw.first...)
	sw.firstBody = nil
	rc.HijackSetNoResponse(true)
	rc.Hijack(func(net.Conn) {
		go func() {
			defer s.parkedWaits.Done()
			run()
			if !sw.broken {
				sw.write([]byte("0\r\n\r\n"))
			}
			_ = sw.conn.Close()
		}()
	})
	return true
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

// runStream writes the events of one stream: the first chunk, framed
// already, then one event per change. wa is nil when no slot was free: the
// client gets the current state and resumes later; done: that state was
// terminal.
func (s *Server) runStream(sw *sseWriter, wa domain.Watch, done bool) {
	// The first chunk (retry and the current state) was framed on the
	// handler's goroutine (stream): encoding it here would grow this
	// goroutine's stack for as long as the stream is held.
	if !sw.write(sw.first) || done || wa == nil {
		return
	}
	sw.first = nil
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
			if !sw.write([]byte(keepAliveChunk)) {
				return
			}
		case <-s.stopping:
			return
		}
	}
}

// sseWriter writes Server-Sent Events as the chunks of a chunked body, on a
// stream's detached connection.
type sseWriter struct {
	conn      net.Conn
	timeout   time.Duration
	sent      int64 // the version of the last event written
	broken    bool  // a write failed: the connection was reset
	first     []byte
	firstBody []byte // the body of the first chunk (retry, and the current state unless sent)
}

// frameFirst frames the stream's first chunk: the retry field, and r unless
// its version was sent already.
func (sw *sseWriter) frameFirst(r *domain.Request) {
	body := []byte("retry: 2000\n\n")
	if r.Version > sw.sent {
		if b := sw.eventBytes(r); b != nil {
			body = append(body, b...)
			sw.sent = r.Version
		}
	}
	sw.firstBody = body
	sw.first = appendChunk(nil, body)
}

// appendChunk appends b as one chunk of a chunked body.
func appendChunk(dst, b []byte) []byte {
	dst = strconv.AppendInt(dst, int64(len(b)), 16)
	dst = append(dst, "\r\n"...)
	dst = append(dst, b...)
	return append(dst, "\r\n"...)
}

// event writes r as an event unless its version was already sent; false
// when the client is gone.
func (sw *sseWriter) event(r *domain.Request) bool {
	if r.Version <= sw.sent {
		return true
	}
	// One buffer for the whole chunk, its size written into the room left
	// before it: a stream blocked on a client that stopped reading holds
	// its event until the write timeout, and a second or third copy of a
	// large one would be held as long.
	const room = 10 // hex digits of the size, and CRLF
	b := append(make([]byte, room, room+1024), "id: "...)
	b = strconv.AppendInt(b, r.Version, 10)
	b = append(b, "\nevent: request\n"...)
	b, ok := appendEventData(b, r)
	if !ok {
		return false
	}
	b = append(b, "\n\r\n"...)
	var size [room]byte
	n := append(strconv.AppendInt(size[:0], int64(len(b)-room-2), 16), "\r\n"...)
	b = b[room-len(n):]
	copy(b, n)
	sw.sent = r.Version
	return sw.write(b)
}

// eventBytes frames r as one event; nil when r cannot be encoded.
func (sw *sseWriter) eventBytes(r *domain.Request) []byte {
	b := append([]byte("id: "), strconv.FormatInt(r.Version, 10)...)
	b = append(b, "\nevent: request\n"...)
	b, ok := appendEventData(b, r)
	if !ok {
		return nil
	}
	return append(b, '\n')
}

// appendEventData appends r's JSON as the event's data field. Compact JSON
// has no raw line end, but the data field does not rely on what the encoder
// of a stored member wrote: a CR would start a field (internal/sse).
func appendEventData(b []byte, r *domain.Request) ([]byte, bool) {
	start := len(b)
	b = append(b, "data: "...)
	b, err := wire.AppendRequest(b, r)
	if err != nil {
		return nil, false
	}
	b = append(b, '\n')
	if js := b[start+len("data: ") : len(b)-1]; bytes.ContainsAny(js, "\r\n") {
		return append(b[:start], sse.AppendData(nil, js)...), true
	}
	return b, true
}

// keepAliveChunk is a stream's keep-alive comment, as a chunk.
const keepAliveChunk = "e\r\n: keep-alive\n\n\r\n"

// write writes b on the connection within the write timeout; a failed
// write (a client that stopped reading, or left) resets the connection, so
// that what is still queued does not stay in the kernel (stream_socket.go).
// One plain Write: a held stream's goroutine keeps the stack its deepest
// call grew, and writev's is larger.
func (sw *sseWriter) write(b []byte) bool {
	if sw.broken {
		return false
	}
	_ = sw.conn.SetWriteDeadline(time.Now().Add(sw.timeout))
	if _, err := sw.conn.Write(b); err != nil {
		sw.broken = true
		resetOnClose(sw.conn)
		return false
	}
	return true
}
