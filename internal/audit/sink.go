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
// domain.AuditEvent and a newline.
func Line(e domain.AuditEvent) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode audit event %s: %w", e.EventID, err)
	}
	return append(b, '\n'), nil
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
	var buf bytes.Buffer
	for _, l := range lines {
		buf.WriteString(`{"time":"`)
		buf.WriteString(s.now().UTC().Format(domain.TimeLayout))
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
