package httpapi

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// Watches follows every change of a tenant's requests (docs/reference.md §16):
// the store's notification hub (store.Hub), which serves Waits too. The
// server serves watches when its Waits is one.
type Watches interface {
	WatchTenant(ctx context.Context, p domain.WatchParams) (domain.TenantWatch, error)
}

// watchRetry is a watch's first chunk: how long EventSource waits before it
// reconnects, as for a request's stream (§12).
const watchRetry = "retry: 2000\n\n"

// watchList answers GET /v1/requests?watch=true (docs/reference.md §16):
// text/event-stream, one event per change of a request the filters keep,
// from any replica and shard, each with its position as id; with
// Last-Event-ID, every change after that position first, or a reset when the
// logs no longer hold them all. Its errors before the first byte are
// problem+json. A held watch takes a wait slot (wait.max_waiters); without
// one, the stream says only retry and ends, and the client comes back.
func (s *Server) watchList(c *fiber.Ctx, values map[string][]string) error {
	f, err := wire.DecodeWatchQuery(values)
	if err != nil {
		return err
	}
	p := principal(c)
	ws, _ := s.opts.Waits.(Watches)
	var sl *slot
	if ws != nil {
		sl = s.holdSlot(p)
	}
	if sl == nil {
		s.opts.Metrics.WaitCapped()
		return s.watchRefused(c)
	}
	w, err := ws.WatchTenant(c.UserContext(), domain.WatchParams{Call: s.call(c), LastEventID: utils.CopyString(c.Get("Last-Event-ID")),
		Filter: f})
	if err != nil {
		s.releaseSlot(sl)
		if domain.ErrorCode(err) == domain.BackendUnavailable {
			return s.watchRefused(c) // Redis away: as past the cap, the client comes back
		}
		return err
	}
	release := func() {
		w.Close()
		s.releaseSlot(sl)
	}
	s.watchHeaders(c)
	if c.Context().IsHead() {
		release()
		return nil
	}
	sw := &sseWriter{timeout: s.streamWriteTimeout()}
	sw.firstBody = []byte(watchRetry)
	sw.first = appendChunk(nil, sw.firstBody)
	if !s.detachStream(c, sw, func() {
		s.opts.Metrics.StreamOpen(1)
		defer s.opts.Metrics.StreamOpen(-1)
		defer release()
		s.runWatch(sw, w)
	}) {
		release() // stopping
		c.Set(fiber.HeaderConnection, "close")
		return c.SendString(watchRetry)
	}
	return nil
}

func (s *Server) watchHeaders(c *fiber.Ctx) {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no") // reverse proxies: do not hold events back
}

// watchRefused answers a watch that cannot be held now: the retry field
// alone, so that the client reconnects (with its Last-Event-ID) later.
func (s *Server) watchRefused(c *fiber.Ctx) error {
	s.watchHeaders(c)
	c.Set(fiber.HeaderConnection, "close")
	return c.SendString(watchRetry)
}

// runWatch writes the events of one watch until wait.stream_max, the
// client leaves, the store cannot be read, or the server stops.
func (s *Server) runWatch(sw *sseWriter, w domain.TenantWatch) {
	if !sw.write(sw.first) {
		return
	}
	sw.first = nil
	end := time.Now().Add(s.opts.Wait.StreamMax)
	beat := s.beats.join()
	defer s.beats.leave()
	sent := w.Position() // the position the client will resume from
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Wait.ReadTimeout)
		evs, wake, err := w.Next(ctx)
		cancel()
		if len(evs) > 0 {
			if !sw.write(watchChunk(evs)) {
				return
			}
			sent = evs[len(evs)-1].ID
		}
		if err != nil {
			return // Redis away: the client resumes from its last event
		}
		select {
		case <-wake:
		case <-beat:
			beat = s.beats.next()
			// A watch whose filter dropped the latest changes moves its
			// client's position past them with the keep-alive: an id field
			// with no data sets EventSource's last event id without an
			// event, so a quiet filtered watch resumes from now, not from its
			// last event (which the log may have trimmed by then).
			chunk := []byte(keepAliveChunk)
			if pos := w.Position(); pos != sent {
				chunk, sent = appendChunk(nil, []byte("id: "+pos+"\n: keep-alive\n\n")), pos
			}
			if !sw.write(chunk) || !time.Now().Before(end) {
				return
			}
		case <-s.stopping:
			return
		}
	}
}

// watchChunk frames evs as one chunk: per change "id: <position>",
// "event: request" and the representation; a reset is "event: reset" with
// data {} (docs/reference.md §16).
func watchChunk(evs []domain.WatchEvent) []byte {
	const room = 10 // hex digits of the size, and CRLF
	b := make([]byte, room, room+512*len(evs))
	for _, e := range evs {
		b = append(b, "id: "...)
		b = append(b, e.ID...)
		if e.Reset {
			b = append(b, "\nevent: reset\ndata: {}\n\n"...)
			continue
		}
		b = append(b, "\nevent: request\n"...)
		if nb, ok := appendEventData(b, e.Request); ok {
			b = nb
		} else {
			b = append(b, "data: {}\n"...) // cannot happen: the record decoded
		}
		b = append(b, '\n')
	}
	b = append(b, "\r\n"...)
	var size [room]byte
	n := append(appendHex(size[:0], len(b)-room-2), "\r\n"...)
	b = b[room-len(n):]
	copy(b, n)
	return b
}

func appendHex(dst []byte, n int) []byte {
	const digits = "0123456789abcdef"
	if n == 0 {
		return append(dst, '0')
	}
	var buf [16]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = digits[n&15]
		n >>= 4
	}
	return append(dst, buf[i:]...)
}
