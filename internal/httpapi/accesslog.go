package httpapi

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// NewAccessLog returns a logger for Options.AccessLog that writes exactly what
// slog.New(slog.NewJSONHandler(w, opts)) writes, but formats the request lines
// itself, because slog's generic attribute machinery (and encoding/json for
// the duration, which slog uses for every float) is a large share of a poll's
// CPU (docs/performance.md, "Why the hot path looks as it does"). Anything else
// logged on it goes through slog.
func NewAccessLog(w io.Writer, opts *slog.HandlerOptions) *slog.Logger {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	lw := &lockedWriter{w: w}
	return slog.New(&accessHandler{Handler: slog.NewJSONHandler(lw, opts), w: lw,
		fast: !opts.AddSource && opts.ReplaceAttr == nil,
		bufs: &sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}})
}

// lockedWriter serialises the writes of both paths of an accessHandler.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// accessHandler is a slog JSON handler that record can bypass. WithAttrs and
// WithGroup return the plain JSON handler: the fast path knows no extra attrs.
type accessHandler struct {
	slog.Handler
	w    *lockedWriter
	fast bool       // no AddSource, no ReplaceAttr: the line is predictable
	bufs *sync.Pool // of *[]byte, the lines being formatted
}

// accessLine is the content of one access-log line.
type accessLine struct {
	method, route string
	status        int
	duration      time.Duration
	requestID     string
	tenant, keyID string
	code          string
	hasCode       bool // the code member is written
}

// log writes l the fast way, or reports false for the caller to use slog
// (a time or string that the fast path does not format like slog).
func (h *accessHandler) log(t time.Time, l *accessLine) bool {
	if !h.fast {
		return false
	}
	bp := h.bufs.Get().(*[]byte)
	defer h.bufs.Put(bp)
	b, ok := appendAccessLine((*bp)[:0], t, l)
	if !ok {
		return false
	}
	if cap(b) <= maxPooledBuf {
		*bp = b
	}
	_, _ = h.w.Write(b) // slog drops write errors too
	return true
}

// appendAccessLine appends what slog's JSON handler writes for the record
// "request" at INFO with l's attrs, or reports false when one of its values
// needs formatting the fast path leaves to slog.
func appendAccessLine(b []byte, t time.Time, l *accessLine) ([]byte, bool) {
	if y := t.Year(); y < 0 || y >= 10000 {
		return b, false
	}
	ms := float64(l.duration.Microseconds()) / 1000
	if ms < 0 || (ms != 0 && ms < 1e-6) || ms >= 1e21 {
		return b, false // encoding/json writes these with an exponent
	}
	b = append(b, `{"time":"`...)
	b = appendRFC3339Nano(b, t)
	b = append(b, `","level":"INFO","msg":"request","method":`...)
	var ok bool
	if b, ok = appendLogString(b, l.method); !ok {
		return b, false
	}
	b = append(b, `,"route":`...)
	if b, ok = appendLogString(b, l.route); !ok {
		return b, false
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(l.status), 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, ms, 'f', -1, 64)
	b = append(b, `,"request_id":`...)
	if b, ok = appendLogString(b, l.requestID); !ok {
		return b, false
	}
	b = append(b, `,"tenant":`...)
	if b, ok = appendLogString(b, l.tenant); !ok {
		return b, false
	}
	b = append(b, `,"key_id":`...)
	if b, ok = appendLogString(b, l.keyID); !ok {
		return b, false
	}
	if l.hasCode {
		b = append(b, `,"code":`...)
		if b, ok = appendLogString(b, l.code); !ok {
			return b, false
		}
	}
	return append(b, "}\n"...), true
}

// appendLogString quotes s as slog's JSON handler does, for printable ASCII
// (all our values: constants, validated tenants, ids and sane request ids);
// anything else reports false.
func appendLogString(b []byte, s string) ([]byte, bool) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf {
			return b, false
		}
		if c == '"' || c == '\\' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', c)
			start = i + 1
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}

// writeAccessLine writes l on the access log: the fast way when it is ours,
// through slog otherwise.
func writeAccessLine(ctx context.Context, lg *slog.Logger, now time.Time, l *accessLine) {
	h := lg.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	if ah, ok := h.(*accessHandler); ok && ah.log(now, l) {
		return
	}
	lg.LogAttrs(ctx, slog.LevelInfo, "request", l.attrs()...)
}

// attrs are l's members as slog attrs, in the order of the line.
func (l *accessLine) attrs() []slog.Attr {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs,
		slog.String("method", l.method),
		slog.String("route", l.route),
		slog.Int("status", l.status),
		slog.Float64("duration_ms", float64(l.duration.Microseconds())/1000),
		slog.String("request_id", l.requestID),
		slog.String("tenant", l.tenant),
		slog.String("key_id", l.keyID))
	if l.hasCode {
		attrs = append(attrs, slog.String("code", l.code))
	}
	return attrs
}

// appendRFC3339Nano is t.AppendFormat(b, time.RFC3339Nano) for years 0..9999,
// by hand: AppendFormat re-parses its layout on every call.
func appendRFC3339Nano(b []byte, t time.Time) []byte {
	_, offset := t.Zone()
	u := t.UTC().Add(time.Duration(offset) * time.Second) // wall clock of t's zone, without more zone lookups
	y, mo, d := u.Date()
	h, mi, sec := u.Clock()
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+mo/10), byte('0'+mo%10), '-', byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':',
		byte('0'+sec/10), byte('0'+sec%10))
	if ns := u.Nanosecond(); ns != 0 { // ".999999999": trailing zeros trimmed
		var frac [9]byte
		for i := 8; i >= 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 9
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, '.')
		b = append(b, frac[:n]...)
	}
	if offset == 0 {
		return append(b, 'Z')
	}
	zone := offset / 60 // minutes, as AppendFormat computes them
	if zone < 0 {
		b = append(b, '-')
		zone = -zone
	} else {
		b = append(b, '+')
	}
	return append(b, byte('0'+zone/600), byte('0'+zone/60%10), ':', byte('0'+zone%60/10), byte('0'+zone%10))
}
