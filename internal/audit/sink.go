package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Sink keeps audit lines. Write gets a batch of complete JSON lines (each
// ending in "\n") and returns nil only once all of them are written for good
// (flushed): the drainer then deletes them from Redis. On an error nothing of
// the batch counts as written; the drainer offers the whole batch again, so a
// sink may see a line more than once (consumers de-duplicate on event_id).
type Sink interface {
	Write(ctx context.Context, lines [][]byte) error
	Close() error
}

// Line encodes one event as its audit line: a JSON object of the members of
// domain.AuditEvent and a newline, the bytes encoding/json writes for it
// (TestLineIsEncodingJSON). The drainer encodes every event, so the line is
// written by hand, as the access log's are, rather than through
// encoding/json's reflection; an event with a string JSON must escape (none
// the service makes) takes encoding/json's path.
func Line(e domain.AuditEvent) ([]byte, error) {
	if !plain(e.EventID) || !plain(e.Tenant) || !plain(e.RequestID) || !plain(e.RequestType) || !plain(e.Type) ||
		!plain(e.By) || !plain(e.FailureCode) || (e.From != nil && !plain(string(*e.From))) || (e.To != nil && !plain(string(*e.To))) {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode audit event %s: %w", e.EventID, err)
		}
		return append(b, '\n'), nil
	}
	b := make([]byte, 0, 240+len(e.EventID)+len(e.RequestID)+len(e.RequestType))
	b = append(b, `{"event_id":"`...)
	b = append(b, e.EventID...)
	b = append(b, `","tenant":"`...)
	b = append(b, e.Tenant...)
	b = append(b, `","request_id":"`...)
	b = append(b, e.RequestID...)
	b = append(b, `","request_type":"`...)
	b = append(b, e.RequestType...)
	b = append(b, `","type":"`...)
	b = append(b, e.Type...)
	b = append(b, `","seq":`...)
	b = strconv.AppendInt(b, int64(e.Seq), 10)
	b = append(b, `,"from":`...)
	b = appendStatus(b, e.From)
	b = append(b, `,"to":`...)
	b = appendStatus(b, e.To)
	b = append(b, `,"by":"`...)
	b = append(b, e.By...)
	b = append(b, `","at":"`...)
	b = e.At.UTC().AppendFormat(b, domain.TimeLayout) // domain.Time's MarshalJSON
	b = append(b, `","version":`...)
	b = strconv.AppendInt(b, e.Version, 10)
	if e.FailureCode != "" {
		b = append(b, `,"failure_code":"`...)
		b = append(b, e.FailureCode...)
		b = append(b, '"')
	}
	return append(b, "}\n"...), nil
}

// plain reports whether encoding/json writes s as it is between quotes:
// printable ASCII without '"', '\\' and the HTML characters it escapes.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func appendStatus(b []byte, st *domain.Status) []byte {
	if st == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = append(b, *st...)
	return append(b, '"')
}

// droppedLine reports n events of tenant that were not recorded because its
// backlog was at the bound. Its event_id names the tenant and the time it was
// made; a crash between writing it and forgetting the count repeats it.
func droppedLine(tenant string, n int64, at time.Time) []byte {
	b, _ := json.Marshal(struct {
		EventID string      `json:"event_id"`
		Tenant  string      `json:"tenant"`
		Type    string      `json:"type"`
		Count   int64       `json:"count"`
		At      domain.Time `json:"at"`
	}{"drop_" + tenant + "_" + strconv.FormatInt(at.UnixMilli(), 10), tenant, domain.AuditDropped, n, domain.Time{Time: at}})
	return append(b, '\n')
}

// LogSink writes each line on the service's log output, wrapped as a log
// record marked as audit: {"time":...,"level":"INFO","msg":"audit","audit":<line>}.
// A batch goes out in one write.
type LogSink struct {
	w   io.Writer
	now func() time.Time
	mu  sync.Mutex
}

// NewLogSink writes on w (serve's log output).
func NewLogSink(w io.Writer) *LogSink { return &LogSink{w: w, now: time.Now} }

func (s *LogSink) Write(_ context.Context, lines [][]byte) error {
	// One write of the whole batch, so one time for all its records.
	stamp := s.now().UTC().Format(domain.TimeLayout)
	var buf bytes.Buffer
	for _, l := range lines {
		buf.WriteString(`{"time":"`)
		buf.WriteString(stamp)
		buf.WriteString(`","level":"INFO","msg":"audit","audit":`)
		buf.Write(bytes.TrimSuffix(l, []byte("\n")))
		buf.WriteString("}\n")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("audit log sink: %w", err)
	}
	return nil
}

func (s *LogSink) Close() error { return nil }

// FileSink appends lines to a file of their own, one write and one fsync per
// batch, and rotates it by size: path is renamed path.1 (path.1 becomes
// path.2, ...) before a batch would take it past maxBytes, and at most keep
// rotated files are kept. A failed write is cut back off the file, so that the
// file only ever holds whole lines; the file is opened again on the next batch
// (after a disk was full, or the file was moved away).
type FileSink struct {
	path     string
	maxBytes int64
	keep     int

	mu   sync.Mutex
	f    *os.File
	size int64
}

// NewFileSink makes a sink appending to path. It opens the file at the first
// batch, so a path that cannot be written yet is a failing sink (reported, and
// retried), not a service that cannot start.
func NewFileSink(path string, maxBytes int64, keep int) *FileSink {
	return &FileSink{path: path, maxBytes: maxBytes, keep: keep}
}

func (s *FileSink) open() error {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	s.f, s.size = f, st.Size()
	return nil
}

// rotate moves path to path.1 and the older files one up, dropping the one
// past keep.
func (s *FileSink) rotate() error {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	if s.keep <= 0 {
		return os.Remove(s.path)
	}
	_ = os.Remove(s.path + "." + strconv.Itoa(s.keep))
	for i := s.keep - 1; i >= 1; i-- {
		from := s.path + "." + strconv.Itoa(i)
		if _, err := os.Stat(from); err == nil {
			if err := os.Rename(from, s.path+"."+strconv.Itoa(i+1)); err != nil {
				return err
			}
		}
	}
	return os.Rename(s.path, s.path+".1")
}

func (s *FileSink) Write(_ context.Context, lines [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.write(lines); err != nil {
		return fmt.Errorf("audit file sink %s: %w", s.path, err)
	}
	return nil
}

func (s *FileSink) write(lines [][]byte) error {
	if s.f == nil {
		if err := s.open(); err != nil {
			return err
		}
	}
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	if s.size > 0 && s.size+int64(n) > s.maxBytes {
		if err := s.rotate(); err != nil {
			return fmt.Errorf("rotate: %w", err)
		}
		if err := s.open(); err != nil {
			return err
		}
	}
	buf := make([]byte, 0, n)
	for _, l := range lines {
		buf = append(buf, l...)
	}
	_, err := s.f.Write(buf)
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		// Cut off what part of the batch went in, so the file holds whole
		// lines only, and open it afresh next time.
		_ = s.f.Truncate(s.size)
		s.f.Close()
		s.f = nil
		return err
	}
	s.size += int64(n)
	return nil
}

func (s *FileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
