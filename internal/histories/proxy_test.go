package histories

import (
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP proxy on loopback between one serve and Redis that injects
// network faults: blackhole (nothing gets through either way while it lasts;
// connections stay open and what was sent arrives after it, as TCP
// retransmits after a partition heals), delay (every chunk waits before it is
// forwarded) and reset (every connection is cut with an RST). It stands in for
// a network partition between that serve and Redis.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu      sync.Mutex
	mode    string // "", "blackhole", "delay"
	delay   time.Duration
	conns   map[net.Conn]bool
	stopped bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(p.close)
	go p.accept()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) close() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.ln.Close()
	p.reset()
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies from src to dst, applying the current fault to every chunk.
func (p *proxy) pipe(src, dst net.Conn) {
	defer func() {
		src.Close()
		dst.Close()
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for {
				p.mu.Lock()
				mode, delay, stopped := p.mode, p.delay, p.stopped
				p.mu.Unlock()
				if stopped {
					return // what was held is dropped with the connections
				}
				if mode == "blackhole" {
					time.Sleep(10 * time.Millisecond) // held until the partition heals
					continue
				}
				if mode == "delay" {
					time.Sleep(delay)
				}
				break
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a cut: the deferred close ends the other direction too
		}
	}
}

// set switches the fault: "" (none), "blackhole" or "delay" (by d).
func (p *proxy) set(mode string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay = mode, d
}

// reset cuts every open connection with an RST.
func (p *proxy) reset() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
}
