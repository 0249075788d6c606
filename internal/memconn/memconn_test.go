package memconn_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/memconn"
)

// TestBuffered: a write far larger than a pipe carries returns before the
// peer reads, and arrives whole and in order; the peer's writes complete
// while nobody reads this side; a read deadline fails a read with a timeout,
// and a later deadline lets the next read wait again; Close ends both sides.
func TestBuffered(t *testing.T) {
	a, b := net.Pipe()
	c := memconn.Buffered(a)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for off := 0; off < len(want); off += 4096 {
		if n, err := c.Write(want[off : off+4096]); n != 4096 || err != nil {
			t.Fatalf("write at %d: %d, %v", off, n, err)
		}
	}
	peerWrote := make(chan error, 1)
	go func() {
		_ = b.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err := b.Write(bytes.Repeat([]byte("r"), 256<<10)) // nobody reads c yet
		peerWrote <- err
	}()
	got := make([]byte, len(want))
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("peer read %v, equal %v", err, bytes.Equal(got, want))
	}
	if err := <-peerWrote; err != nil {
		t.Fatalf("the peer's write waited for a reader: %v", err)
	}
	back := make([]byte, 256<<10)
	if _, err := io.ReadFull(c, back); err != nil || back[0] != 'r' || back[len(back)-1] != 'r' {
		t.Fatalf("read back: %v", err)
	}

	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	go func() { _, _ = b.Write([]byte("x")) }()
	one := make([]byte, 1)
	if _, err := c.Read(one); err != nil || one[0] != 'x' {
		t.Fatalf("read after clearing the deadline: %q, %v", one, err)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("y")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if _, err := b.Read(one); err == nil {
		t.Fatal("the peer can still read after close")
	}
}

// TestBufferedKeepsOrderUnderConcurrentWrites: small writes made while the
// write-behind pump is busy, and while it wakes to find nothing new, arrive
// whole and in order: the buffer the pump hands the peer is never the one
// writers append into (if it were, the peer would read bytes being
// overwritten, and this stream of counters would arrive garbled).
func TestBufferedKeepsOrderUnderConcurrentWrites(t *testing.T) {
	a, b := net.Pipe()
	c := memconn.Buffered(a)
	defer c.Close()
	const n = 200000
	go func() {
		var msg [8]byte
		for i := range uint64(n) {
			binary.BigEndian.PutUint64(msg[:], i)
			if _, err := c.Write(msg[:]); err != nil {
				return
			}
			if i%64 == 0 {
				runtime.Gosched() // let the pump wake with little or nothing to send
			}
		}
	}()
	_ = b.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 8)
	for i := range uint64(n) {
		if i%1000 == 0 {
			time.Sleep(50 * time.Microsecond) // a slow reader: the pump's write is in flight meanwhile
		}
		if _, err := io.ReadFull(b, buf); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if got := binary.BigEndian.Uint64(buf); got != i {
			t.Fatalf("message %d arrived as %d: the stream was garbled", i, got)
		}
	}
}
