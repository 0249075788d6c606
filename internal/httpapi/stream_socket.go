package httpapi

import "net"

// A stream's socket (kernel memory, not the process's): an event stream can
// live ten minutes and its client may stop reading at any point. The kernel
// grows a socket's send buffer by itself (tcp_wmem, up to 4 MiB by default)
// while writes keep coming, so a client that never reads could pin megabytes
// of kernel memory per stream, and, once the write timeout closed the
// stream, the orphaned socket kept them while it tried to deliver them to a
// client that stayed connected. A few hundred such streams pushed a host
// past its TCP memory-pressure threshold, where every socket suffers, Redis
// connections included.
//
// So a stream's send buffer is fixed (setting SO_SNDBUF turns the growth off
// for that socket), and a stream whose write failed (timed out) resets its
// connection (SO_LINGER 0): the close drops what was queued at once instead
// of leaving it to drain.

// streamSendBuffer is the SO_SNDBUF of a stream's socket; Linux doubles it
// for its bookkeeping. An event larger than it is written as the client
// reads, within the stream's write timeout.
const streamSendBuffer = 16 << 10

// boundSendBuffer fixes the send buffer of a stream's connection (a TCP
// socket; anything else, such as a test's in-memory connection, is left as
// it is).
func boundSendBuffer(conn net.Conn) {
	if tc, ok := conn.(interface{ SetWriteBuffer(int) error }); ok {
		_ = tc.SetWriteBuffer(streamSendBuffer)
	}
}

// resetOnClose makes the close of conn a reset that drops unsent data.
func resetOnClose(conn net.Conn) {
	if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
		_ = tc.SetLinger(0)
	}
}
