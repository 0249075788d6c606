package testenv

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestFindBinaryMissing(t *testing.T) {
	_, err := findBinary("no-such-redis-server-xyz")
	if err == nil || !strings.Contains(err.Error(), "apt-get install redis-server") {
		t.Fatalf("err = %v", err)
	}
}

func TestStartServerFailures(t *testing.T) {
	bin, err := findBinary("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startServer("/nonexistent/redis-server", t.TempDir(), false, nil); err == nil {
		t.Fatal("started a missing binary")
	}

	// A bad argument: the error says the process exited and shows its log.
	_, err = startServer(bin, t.TempDir(), false, []string{"--no-such-directive", "x"})
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("err = %v", err)
	}

	// A port someone else holds is recognised as such (startServer then retries).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &server{bin: bin, port: l.Addr().(*net.TCPAddr).Port, dir: t.TempDir()}
	if err := s.start(startTimeout); err == nil {
		s.kill()
		t.Fatal("started on a taken port")
	}
	if !s.portTaken() {
		t.Fatalf("port conflict not recognised; log:\n%s", s.logTail(10))
	}
}

func TestFreePortClusterBus(t *testing.T) {
	for range 20 {
		p, err := freePort(true)
		if err != nil {
			t.Fatal(err)
		}
		if p+clusterBus > 65535 || !canListen(p) || !canListen(p+clusterBus) {
			t.Fatalf("port %d (bus %d) not usable", p, p+clusterBus)
		}
		if p >= ephemeralLow() || p+clusterBus >= ephemeralLow() {
			t.Fatalf("port %d (bus %d) in the ephemeral range", p, p+clusterBus)
		}
	}
}

func TestCheckClusterRejectsStandalone(t *testing.T) {
	p := StartRedisProcess(t)
	if err := checkCluster([]string{p.Addr()}, 0); err == nil {
		t.Fatal("a standalone server passed as a cluster")
	}
}

func TestStartServerOnAnotherRedisPort(t *testing.T) {
	other := StartRedisProcess(t)
	s := &server{bin: other.s.bin, port: other.s.port, dir: t.TempDir()}
	err := s.start(startTimeout)
	if err == nil {
		s.kill()
		t.Fatal("started on a port another redis-server holds")
	}
	if !errors.Is(err, errPortTaken) && !s.portTaken() {
		t.Fatalf("port conflict not recognised: %v", err)
	}
	if err := ping(other.Addr(), time.Second); err != nil {
		t.Fatalf("the other server was harmed: %v", err)
	}
}
