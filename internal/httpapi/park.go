package httpapi

import (
	"bufio"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/valyala/fasthttp"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// A held long poll is parked: its connection leaves fasthttp (Hijack), so
// that neither fasthttp's worker goroutine, its 4 KiB read buffer and
// request context, nor Fiber's context stay with it while it waits. What the
// answer needs is kept in a parkedWait and the wait runs on a goroutine of its
// own with a small stack: a held long poll costs about 8 KiB instead of 19
// (docs/performance.md, Waiting). The answer closes the connection
// (Connection: close), and the client's next call opens a new one: handing
// the connection back to fasthttp (ServeConn) would make it a "new"
// connection that a shutdown waits 5 s for, and would need the bytes of a
// pipelined request that fasthttp's freed buffer held.
type parkedWait struct {
	s       *Server
	wa      domain.Watch
	slot    *slot
	r       *domain.Request
	applied int
	match   string // If-None-Match
	view    view   // what the answer shows of the request (lro.go)
	base    string // the URLs' base, for the views that name one
	conn    net.Conn
	header  fasthttp.ResponseHeader // the headers set before the wait (id, CORS, rate limits)
	uri     string                  // the request's, for the answer's context (error answers name it)
	origin  string
	head    bool
	id      string // the request id
	who     domain.Principal
	obs     *routeObs // nil when nothing is observed
	start   time.Time
}

// park hands the wait of c to a parkedWait; the handler then returns, and
// fasthttp writes nothing (HijackSetNoResponse). false once the server is
// stopping: the caller answers at once.
func (s *Server) park(c *fiber.Ctx, wa domain.Watch, sl *slot, r *domain.Request, applied int, match string, v view) bool {
	s.parkMu.Lock()
	select {
	case <-s.stopping:
		s.parkMu.Unlock()
		return false
	default:
	}
	s.parkedWaits.Add(1) // before StopWaits can Wait: both hold parkMu
	s.parkMu.Unlock()
	rc := c.Context()
	st := s.state(c)
	pw := &parkedWait{s: s, wa: wa, slot: sl, r: r, applied: applied, match: utils.CopyString(match), conn: rc.Conn(),
		uri: utils.CopyString(c.OriginalURL()), origin: utils.CopyString(c.Get(fiber.HeaderOrigin)),
		head: rc.IsHead(), id: st.id, who: st.principal,
		start: st.start, view: v}
	if v.namesURLs() {
		pw.base = s.baseURL(c) // the answer's context has no Host
	}
	if s.observing() {
		pw.obs = s.routeOf(c)
	}
	s.writeRate(c) // the answer is written later, with the headers set now
	rc.Response.Header.CopyTo(&pw.header)
	st.parked = true // observe records the answer when it is written
	s.opts.Metrics.LongPollHeld(1)
	rc.HijackSetNoResponse(true)
	rc.Hijack(func(net.Conn) { go pw.run() }) // returning frees fasthttp's part
	return true
}

// run waits, answers, and closes the connection.
func (pw *parkedWait) run() {
	s := pw.s
	hw := s.clock.hold(pw.conn, time.Duration(pw.applied)*time.Second)
	r, gone, err := s.waitFor(pw.wa, hw, pw.r)
	s.clock.release(hw)
	pw.wa.Close()
	s.releaseSlot(pw.slot)
	s.opts.Metrics.LongPollHeld(-1)
	pw.answer(r, err, gone)
	_ = pw.conn.Close()
	s.parkedWaits.Done()
}

// answer writes the answer on the connection as the handler would have
// (unless the client is gone), and records it.
func (pw *parkedWait) answer(r *domain.Request, err error, gone bool) {
	s := pw.s
	var req fasthttp.Request
	req.Header.SetMethod(fiber.MethodGet)
	if pw.head {
		req.Header.SetMethod(fiber.MethodHead)
	}
	req.SetRequestURI(pw.uri)
	if pw.origin != "" {
		req.Header.Set(fiber.HeaderOrigin, pw.origin)
	}
	var rc fasthttp.RequestCtx
	rc.Init(&req, pw.conn.RemoteAddr(), nil)
	pw.header.CopyTo(&rc.Response.Header)
	c := s.app.AcquireCtx(&rc)
	defer s.app.ReleaseCtx(c)
	st := &reqState{id: pw.id, principal: pw.who, base: pw.base}
	c.Locals(localState, st)
	if err != nil {
		s.answerError(c, err)
	} else if aerr := s.answerWait(c, r, pw.applied, pw.match, pw.view); aerr != nil {
		s.answerError(c, aerr)
	}
	resp := &rc.Response
	resp.SkipBody = pw.head
	resp.SetConnectionClose()
	resp.Header.Set(fiber.HeaderDate, string(fasthttp.AppendHTTPDate(nil, time.Now())))
	if !gone {
		_ = pw.conn.SetWriteDeadline(time.Now().Add(s.streamWriteTimeout()))
		w := bufio.NewWriterSize(pw.conn, 2048)
		if resp.Write(w) == nil {
			_ = w.Flush()
		}
	}
	if pw.obs != nil {
		s.recordRoute(c, pw.obs, pw.start, resp.StatusCode())
	}
}
