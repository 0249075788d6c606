// Package logbuf batches log lines into few writes, so that an access log does
// not cost a write system call per request (docs/performance.md, "Why the hot
// path looks as it does"); batching them costs at most one flush interval of
// lines when the process dies without Close (a crash, SIGKILL).
package logbuf

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Writer buffers whole Write calls (a log handler writes one line per call)
// and passes them on to the underlying writer in batches: when the buffer
// would overflow, when the flush interval has passed, on Flush and on Close.
// A line is never split across two writes, so lines written to the same file
// by Direct or by another writer never interleave with part of one of ours.
// It is safe for concurrent use.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	closed bool

	stop chan struct{}
	done chan struct{}
}

// New returns a Writer over w that flushes at least every interval and whenever
// size bytes are pending. Close it to stop its flusher and write what is left.
func New(w io.Writer, interval time.Duration, size int) *Writer {
	b := &Writer{w: w, buf: make([]byte, 0, size), stop: make(chan struct{}), done: make(chan struct{})}
	go b.flusher(interval)
	return b
}

func (b *Writer) flusher(interval time.Duration) {
	defer close(b.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			// An error here has nowhere to go: the next Write or Flush reports
			// a persistent one.
			_ = b.Flush()
		}
	}
}

// Write buffers p, or writes it through once the Writer is closed.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf)+len(p) > cap(b.buf) {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	if b.closed || len(p) > cap(b.buf) {
		return b.write(p)
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// Flush writes what is pending.
func (b *Writer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *Writer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.write(b.buf)
	b.buf = b.buf[:0] // a failed write is dropped, as an unbuffered one would be
	return err
}

func (b *Writer) write(p []byte) (int, error) {
	n, err := b.w.Write(p)
	if err != nil {
		return n, fmt.Errorf("logbuf: %w", err)
	}
	return n, nil
}

// Close stops the flusher and writes what is pending; later writes go straight
// through. Calling it again does nothing.
func (b *Writer) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	<-b.done
	return b.Flush()
}

// Direct is a writer for lines that must not wait (warnings, errors): each
// Write goes out at once, after the lines already pending, so the order of
// lines in the output is the order in which they were written.
func (b *Writer) Direct() io.Writer { return direct{b} }

type direct struct{ b *Writer }

func (d direct) Write(p []byte) (int, error) {
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) > 0 && len(b.buf)+len(p) <= cap(b.buf) {
		b.buf = append(b.buf, p...) // one write for both
		return len(p), b.flushLocked()
	}
	if err := b.flushLocked(); err != nil {
		return 0, err
	}
	return b.write(p)
}
