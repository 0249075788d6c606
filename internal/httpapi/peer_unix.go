//go:build unix

package httpapi

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the client of conn has closed or reset it, by
// peeking at the socket without consuming a byte (a pipelined next request
// stays where fasthttp will read it). fasthttp learns of a departed client
// only when a write fails, and a held long poll writes nothing until it
// answers. Connections that are not sockets (tests' in-memory ones) never
// count as closed.
func peerClosed(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0 // an orderly shutdown reads as 0 bytes
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default:
			closed = true // reset, or any other failure of the socket
		}
		return true // never wait for readability
	})
	return closed
}
