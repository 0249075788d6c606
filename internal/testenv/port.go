package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Ports are picked below the kernel's ephemeral range, so that no outgoing
// connection of the tests (which get their local port from that range) can
// take a port between the moment it is found free and the moment a server
// binds it, or while a stopped server waits to be restarted on it.
// Each port is handed out at most once per test binary.
const (
	portMin      = 15000
	clusterBus   = 10000 // Redis Cluster bus port = client port + 10000
	maxPortTries = 200
)

var ports struct {
	mu   sync.Mutex
	used map[int]bool
}

// ephemeralLow returns the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil {
				return lo
			}
		}
	}
	return 32768
}

// canListen reports whether 127.0.0.1:port can be listened on right now.
func canListen(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// kernelPort asks the kernel for a free loopback port (listen on :0, close).
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePort returns a loopback port that is free now and was not handed out
// before by this test binary. With bus set, port+10000 is free too (for the
// Redis Cluster bus).
func freePort(bus bool) (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
	ok := func(p int) bool {
		if p <= 0 || p == 6379 || ports.used[p] || !canListen(p) {
			return false
		}
		if bus {
			b := p + clusterBus
			return b <= 65535 && b != 16379 && !ports.used[b] && canListen(b)
		}
		return true
	}
	take := func(p int) int {
		ports.used[p] = true
		if bus {
			ports.used[p+clusterBus] = true
		}
		return p
	}

	hi := ephemeralLow() - 1 // highest port outside the ephemeral range
	if bus {
		hi -= clusterBus
	}
	if hi-portMin >= 1000 {
		for range maxPortTries {
			if p := portMin + rand.IntN(hi-portMin+1); ok(p) {
				return take(p), nil
			}
		}
	}
	// Unusual ephemeral range (or all tries taken): let the kernel choose.
	var lastErr error
	for range maxPortTries {
		p, err := kernelPort()
		if err != nil {
			lastErr = err
			continue
		}
		if ok(p) {
			return take(p), nil
		}
	}
	return 0, fmt.Errorf("testenv: no free loopback port found (bus=%v): %v", bus, lastErr)
}

// FreePort returns a TCP port on 127.0.0.1 that is free now and that no other
// FreePort call of this test binary returns.
func FreePort(tb testing.TB) int {
	tb.Helper()
	p, err := freePort(false)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
