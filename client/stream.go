package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StreamOptions tune Stream. A nil *StreamOptions takes every default.
type StreamOptions struct {
	// OnChange is called with every state the stream brings (versions strictly
	// increase), the terminal one included, on the goroutine that called
	// Stream. default: nil.
	OnChange func(*Request)
	// LastEventID resumes a stream: the service sends only states after this
	// version (the id of the last event seen); when it is the terminal
	// version, Stream returns the request as it is, without OnChange.
	// default: "", the current state first.
	LastEventID string
	// MaxBackoff caps the jittered, doubling backoff between reconnections
	// after errors. default: 30s.
	MaxBackoff time.Duration
	// MaxErrors is how many failed connections in a row (transport errors,
	// 429, 503, a stream cut before its first event) make Stream give up.
	// default: 10.
	MaxErrors int
}

// Stream follows a request to its terminal state over the event stream
// (GET /v1/requests/{id}/stream, read scope or its poll token) and returns the
// final state. The service closes a stream after wait.stream_max (10m by
// default) or when it restarts; Stream then reconnects with Last-Event-ID,
// after the reconnection time the stream set (retry:, 2s by default) or a
// longer backoff after errors, so no state is missed and none is repeated.
//
// Like Wait, it returns when the request is terminal, when the context is
// done, or on an error answer other than 429 and 503, with the last state it
// saw.
func (c *Client) Stream(ctx context.Context, id string, opts *StreamOptions) (*Request, error) {
	if id == "" {
		return nil, errNoID
	}
	var o StreamOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.MaxErrors <= 0 {
		o.MaxErrors = 10
	}
	pace := RetryPolicy{MinBackoff: c.retry.MinBackoff, MaxBackoff: o.MaxBackoff}.withDefaults()
	s := &streamState{lastID: o.LastEventID, reconnect: 2 * time.Second, onChange: o.OnChange}
	errs := 0
	for {
		start := time.Now()
		got, err := c.streamOnce(ctx, id, s)
		if s.last != nil && s.last.Done {
			return s.last, nil
		}
		if ctx.Err() != nil {
			return s.last, fmt.Errorf("stream request %s: %w", id, ctx.Err())
		}
		if errors.Is(err, errStreamOver) {
			// Resumed at the terminal version: the caller has seen the end
			// already, and this is it.
			r, err := c.Get(ctx, id)
			if err != nil {
				return s.last, fmt.Errorf("stream request %s: %w", id, err)
			}
			return r, nil
		}
		var e *Error
		if errors.As(err, &e) && e.Status != http.StatusTooManyRequests && e.Status != http.StatusServiceUnavailable {
			return s.last, fmt.Errorf("stream request %s: %w", id, err)
		}
		delay := s.reconnect
		if err == nil && (got > 0 || time.Since(start) > s.reconnect) {
			errs = 0 // a stream that ended cleanly (wait.stream_max): resume
		} else {
			errs++
			if errs >= o.MaxErrors {
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				return s.last, fmt.Errorf("stream request %s: %w", id, err)
			}
			ra := time.Duration(0)
			if e != nil {
				ra = e.RetryAfter
			}
			delay = max(delay, pace.backoff(errs, 0), ra)
		}
		if err := sleep(ctx, delay); err != nil {
			return s.last, fmt.Errorf("stream request %s: %w", id, err)
		}
	}
}

// errStreamOver is a 204 answer: Last-Event-ID named the terminal version.
var errStreamOver = errors.New("stream over")

// streamState is what survives a reconnection.
type streamState struct {
	lastID    string
	reconnect time.Duration
	last      *Request
	onChange  func(*Request)
}

// streamOnce reads one connection's events; got counts the states it brought.
func (c *Client) streamOnce(ctx context.Context, id string, s *streamState) (got int, err error) {
	h := http.Header{"Cache-Control": {"no-store"}}
	if s.lastID != "" {
		h.Set("Last-Event-ID", s.lastID)
	}
	res, err := c.send(ctx, &call{method: http.MethodGet, path: requestPath(id, "stream"), header: h}, nil, "text/event-stream")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNoContent {
		return 0, errStreamOver
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return 0, problemError(res, b)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return 0, fmt.Errorf("stream answered %q, not text/event-stream", ct)
	}
	r := newSSEReader(res.Body)
	for {
		ev, err := r.Next()
		if r.retry > 0 {
			s.reconnect = r.retry
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return got, err
		}
		s.lastID = ev.ID
		if ev.Event != "request" && ev.Event != "" {
			continue // an event type of a later version of the API
		}
		var rq Request
		if err := json.Unmarshal([]byte(ev.Data), &rq); err != nil {
			return got, fmt.Errorf("decode event %s: %w", ev.ID, err)
		}
		got++
		if s.last == nil || rq.Version > s.last.Version {
			if s.onChange != nil {
				s.onChange(&rq)
			}
			s.last = &rq
		}
		if rq.Done {
			return got, nil
		}
	}
}

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	// ID is the last event ID as it stands after this event (it carries over
	// from earlier events when this one set none).
	ID    string
	Event string
	Data  string
}

// sseReader parses text/event-stream as the WHATWG HTML standard says
// (§9.2.6): lines end with CRLF, LF or CR; a line opening with ':' is a
// comment; "field: value" with one optional space after the colon; data lines
// join with LF; an empty line dispatches the event when it has data; an id
// with NUL is ignored; retry takes only ASCII digits; a leading BOM is dropped.
type sseReader struct {
	sc     *bufio.Scanner
	lastID string
	retry  time.Duration // the last retry: field, 0 if none
	first  bool
}

// maxSSELine bounds one line (a representation with a full context and result
// is some 25 KiB).
const maxSSELine = 4 << 20

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	sc.Split(scanSSELines)
	return &sseReader{sc: sc, first: true}
}

// scanSSELines splits at CRLF, LF or CR.
func scanSSELines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil // a CR at the end: wait to see whether LF follows
	}
	if atEOF && len(data) > 0 {
		// A last line without its end is dropped by the standard (no dispatch
		// without the blank line), so it need not be returned whole.
		return len(data), data, nil
	}
	return 0, nil, nil
}

// Next returns the next event, or io.EOF at the end of the stream (an event
// not finished by a blank line is dropped, as the standard says).
func (r *sseReader) Next() (sseEvent, error) {
	var (
		data    strings.Builder
		hasData bool
		event   string
	)
	for r.sc.Scan() {
		line := r.sc.Text()
		if r.first {
			line = strings.TrimPrefix(line, "\uFEFF")
			r.first = false
		}
		if line == "" {
			if !hasData {
				event = ""
				continue
			}
			return sseEvent{ID: r.lastID, Event: event, Data: data.String()}, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				r.lastID = value
			}
		case "retry":
			if n, err := strconv.ParseUint(value, 10, 31); err == nil && value != "" && !strings.ContainsAny(value, "+-") {
				r.retry = time.Duration(n) * time.Millisecond
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}
