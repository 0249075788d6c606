package store

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// subscriptionClient is the client the hub opens its subscription connections
// with. Off a Cluster and off Sentinel it is a copy of the store's client
// whose connections, when they are not sockets (the embedded store's
// in-memory pipes), buffer their writes: on a pipe a write waits until the
// other end reads, and a subscription deadlocks when miniredis writes an
// announcement (waiting for the hub to read) while the hub writes a SUBSCRIBE
// (waiting for miniredis to read) and go-redis's PubSub lock keeps the hub's
// reader from reading. A socket's kernel buffer is what breaks that cycle on a
// real Redis; writeBehind is that buffer.
func subscriptionClient(rdb redis.UniversalClient) redis.UniversalClient {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return rdb
	}
	co := c.Options()
	if co.Addr == "FailoverClient" { // go-redis's mark of a Sentinel client: keep its master discovery
		return rdb
	}
	// A fresh Options with what a connection needs: a copy of the whole
	// struct would share go-redis's internal state (push handlers) with c.
	o := redis.Options{Network: co.Network, Addr: co.Addr, Protocol: co.Protocol, Username: co.Username,
		Password: co.Password, CredentialsProvider: co.CredentialsProvider, DB: co.DB, TLSConfig: co.TLSConfig,
		DialTimeout: co.DialTimeout, ReadTimeout: co.ReadTimeout, WriteTimeout: co.WriteTimeout,
		ContextTimeoutEnabled: co.ContextTimeoutEnabled, DisableIdentity: co.DisableIdentity, PoolSize: 1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}}
	dial := co.Dialer
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		switch conn.(type) {
		case *net.TCPConn, *net.UnixConn, *tls.Conn:
			return conn, nil
		}
		return newWriteBehind(conn), nil
	}
	return redis.NewClient(&o)
}

// writeBehind is a net.Conn whose writes return at once and reach the
// underlying connection from a goroutine of its own, in order. A write error
// is reported by the next Write.
type writeBehind struct {
	net.Conn
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	err    error
	closed bool
}

func newWriteBehind(c net.Conn) *writeBehind {
	w := &writeBehind{Conn: c}
	w.cond = sync.NewCond(&w.mu)
	go w.flush()
	return w
}

func (w *writeBehind) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
		return 0, w.err
	case w.closed:
		return 0, net.ErrClosed
	}
	w.buf = append(w.buf, p...)
	w.cond.Signal()
	return len(p), nil
}

func (w *writeBehind) flush() {
	for {
		w.mu.Lock()
		for len(w.buf) == 0 && !w.closed {
			w.cond.Wait()
		}
		if w.closed {
			w.mu.Unlock()
			return
		}
		b := w.buf
		w.buf = nil
		w.mu.Unlock()
		if _, err := w.Conn.Write(b); err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			_ = w.Conn.Close()
			return
		}
	}
}

func (w *writeBehind) Close() error {
	w.mu.Lock()
	w.closed = true
	w.cond.Signal()
	w.mu.Unlock()
	return w.Conn.Close()
}

// SetWriteDeadline does nothing: writes never wait.
func (w *writeBehind) SetWriteDeadline(time.Time) error { return nil }

func (w *writeBehind) SetDeadline(t time.Time) error { return w.Conn.SetReadDeadline(t) }
