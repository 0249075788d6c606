package testenv

import (
	"bufio"
	"bytes"
	"strings"
	"sync"
	"time"
)

// Buffer is a bytes.Buffer safe for concurrent writers and readers: a log or
// stdout destination that a test reads while the program still writes.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Clock is a settable clock for code that takes a func() time.Time.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d (backwards when d < 0).
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Paced runs steps one after the other in the background, sleeping pause
// before each: a worker moving a request along while the test waits for it.
// The channel receives the first step's error, or nil once all have run.
func Paced(pause time.Duration, steps ...func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		for _, s := range steps {
			time.Sleep(pause)
			if err := s(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// ReadSSELine reads one line of an event stream, ended by CR, LF or CRLF.
func ReadSSELine(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		c, err := br.ReadByte()
		if err != nil {
			return "", err
		}
		switch c {
		case '\n':
			return b.String(), nil
		case '\r':
			if next, err := br.Peek(1); err == nil && next[0] == '\n' {
				_, _ = br.ReadByte()
			}
			return b.String(), nil
		}
		b.WriteByte(c)
	}
}
