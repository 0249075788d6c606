// Package memconn makes an in-memory connection behave like a socket. The
// embedded store reaches miniredis through net.Pipe, which has no buffer: a
// write returns only once the peer has read it. Redis clients assume a
// socket's buffers (a pipeline is written whole before its replies are read;
// a server writes pushed messages whether or not the subscriber is reading at
// that moment), and over a bare pipe both ends then wait for each other
// (docs/pitfalls.md). Buffered gives each direction an unbounded buffer and a
// goroutine that moves it on, so that code above the embedded store is written
// exactly as for Redis over TCP.
//
// It imports nothing of the project, so that the store and internal/testenv
// can both dial through it.
package memconn

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Dialer dials through dial (miniredis's Dial) and buffers the connection:
// the Dialer option of a go-redis client for the embedded store.
func Dialer(dial func() (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) {
		c, err := dial()
		if err != nil {
			return nil, err
		}
		return Buffered(c), nil
	}
}

// Buffered wraps c so that Write never waits for the peer to read (write
// behind) and the peer's writes never wait for this side to read (read ahead).
// Read deadlines are honoured; writes never block, so write deadlines have
// nothing to bound. Closing it closes c.
func Buffered(c net.Conn) net.Conn {
	b := &conn{Conn: c, readable: make(chan struct{}, 1), writable: make(chan struct{}, 1), closed: make(chan struct{})}
	go b.readAhead()
	go b.writeBehind()
	return b
}

type conn struct {
	net.Conn // the pipe's end: addresses, and the reads and writes of the pumps

	mu       sync.Mutex
	in       []byte // read ahead, not yet read
	inErr    error  // why read-ahead stopped; returned once in is empty
	out      []byte // written, not yet passed on
	outErr   error  // why write-behind stopped
	deadline time.Time

	readable  chan struct{} // poked when in, inErr or the deadline changes
	writable  chan struct{} // poked when out grows
	closed    chan struct{}
	closeOnce sync.Once
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *conn) readAhead() {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Conn.Read(buf)
		c.mu.Lock()
		c.in = append(c.in, buf[:n]...)
		if err != nil {
			c.inErr = err
		}
		c.mu.Unlock()
		poke(c.readable)
		if err != nil {
			return
		}
	}
}

func (c *conn) writeBehind() {
	var spare []byte
	for {
		select {
		case <-c.writable:
		case <-c.closed:
			return
		}
		c.mu.Lock()
		if len(c.out) == 0 {
			// A wake-up for bytes an earlier round already sent. Swapping
			// here would hand writers spare while it is also c.out's next
			// array, and the round after would send spare while they
			// append into it.
			c.mu.Unlock()
			continue
		}
		out := c.out
		c.out = spare[:0]
		c.mu.Unlock()
		if _, err := c.Conn.Write(out); err != nil {
			c.mu.Lock()
			c.outErr = err
			c.mu.Unlock()
			return
		}
		spare = out
	}
}

func (c *conn) Read(p []byte) (int, error) {
	for {
		c.mu.Lock()
		if len(c.in) > 0 {
			n := copy(p, c.in)
			c.in = c.in[n:]
			if len(c.in) == 0 {
				c.in = c.in[:0:0] // let a large read-ahead go
			}
			c.mu.Unlock()
			return n, nil
		}
		err, deadline := c.inErr, c.deadline
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if err := c.await(deadline); err != nil {
			return 0, err
		}
	}
}

// await waits for read-ahead to move, the deadline to change or pass, or
// the connection to close.
func (c *conn) await(deadline time.Time) error {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		wait := time.Until(deadline)
		if wait <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-c.readable:
	case <-timeout:
	case <-c.closed:
		return net.ErrClosed
	}
	return nil
}

func (c *conn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	c.mu.Lock()
	if err := c.outErr; err != nil {
		c.mu.Unlock()
		if errors.Is(err, io.ErrClosedPipe) {
			err = net.ErrClosed
		}
		return 0, err
	}
	c.out = append(c.out, p...)
	c.mu.Unlock()
	poke(c.writable)
	return len(p), nil
}

func (c *conn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.Conn.Close()
	})
	return err
}

func (c *conn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	poke(c.readable)
	return nil
}

func (c *conn) SetWriteDeadline(time.Time) error { return nil }
