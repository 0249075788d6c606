package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	startTimeout   = 15 * time.Second // until a new redis-server answers PING
	restartTimeout = 30 * time.Second // Restart may have to load an AOF/RDB
	startAttempts  = 5                // new ports tried when a port is taken
)

// findBinary finds a Redis executable in PATH or in the usual directories.
func findBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/bin", "/usr/local/bin", "/usr/sbin", "/opt/homebrew/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH, /usr/bin or /usr/local/bin: install Redis "+
		"(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) or point %s / %s at running servers",
		name, EnvRedisAddr, EnvClusterAddrs)
}

// server is one redis-server child process on a fixed port and directory.
type server struct {
	bin   string
	port  int
	dir   string
	extra []string
	// wrap, when set, runs the server under another program (its command
	// line, to which bin and the arguments are appended): valgrind, say,
	// which runs it in the same process.
	wrap []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	waitErr error         // valid once done is closed
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

func (s *server) logPath() string { return filepath.Join(s.dir, "redis.log") }

func (s *server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "",
	}
	return append(a, s.extra...) // later arguments win
}

// start starts the process and waits until it answers PING.
func (s *server) start(timeout time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running() {
		return fmt.Errorf("redis-server on %s is already running", s.addr())
	}
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, s.args()...)
	if len(s.wrap) > 0 {
		cmd = exec.Command(s.wrap[0], append(append(slices.Clone(s.wrap[1:]), s.bin), s.args()...)...)
	}
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := spawn(cmd); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	s.cmd, s.done = cmd, done
	go func() {
		err := cmd.Wait()
		s.waitErr = err
		close(done)
	}()
	if err := waitPing(s.addr(), done, timeout); err != nil {
		s.killLocked()
		if err == errExited {
			err = fmt.Errorf("%w (%v)", err, s.waitErr)
		}
		return s.startErr(err)
	}
	// Make sure the PONG came from this process and not from another
	// redis-server that took the port first (our process then exits).
	if pid, err := serverPID(s.addr()); err != nil || pid != cmd.Process.Pid {
		s.killLocked()
		return s.startErr(fmt.Errorf("%w: the server answering there has pid %d (%v), not %d",
			errPortTaken, pid, err, cmd.Process.Pid))
	}
	return nil
}

func (s *server) startErr(err error) error {
	return fmt.Errorf("redis-server %s on %s: %w\n--- last lines of %s ---\n%s",
		strings.Join(s.args(), " "), s.addr(), err, s.logPath(), s.logTail(25))
}

var errPortTaken = errors.New("port taken")

// serverPID returns the process_id that the Redis at addr reports.
func serverPID(addr string) (int, error) {
	c := newClient(addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(infoFields(info)["process_id"])
}

func (s *server) running() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to exit. It is a no-op when
// the process is not running.
func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *server) killLocked() {
	if !s.running() {
		return
	}
	_ = s.cmd.Process.Kill() // SIGKILL also ends a SIGSTOPped process
	<-s.done
}

func (s *server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return fmt.Errorf("redis-server on %s is not running", s.addr())
	}
	return s.cmd.Process.Signal(sig)
}

func (s *server) logTail(n int) string { return fileTail(s.logPath(), n) }

// fileTail returns the last n lines of the file at path.
func fileTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stopWith kills the server when tb ends, before its TempDir is removed, and
// if tb failed logs the server's last lines first: a failed fault test is
// often about what Redis did (a promotion, a full resynchronisation), and the
// log is gone with the TempDir otherwise.
func (s *server) stopWith(tb testing.TB) {
	tb.Cleanup(func() {
		s.kill()
		if tb.Failed() {
			s.mu.Lock()
			extra := strings.Join(s.extra, " ")
			s.mu.Unlock()
			tb.Logf("--- last lines of redis-server %s (%s) ---\n%s", s.addr(), extra, s.logTail(40))
		}
	})
}

// portTaken reports whether the last start failed because a port was in use.
func (s *server) portTaken() bool {
	t := s.logTail(10)
	return strings.Contains(t, "Address already in use") || strings.Contains(t, "Failed listening on port")
}

// startServer starts a redis-server in dir on a free port (with a free
// cluster bus port when bus is set), trying other ports when one turns out
// to be taken by someone else.
func startServer(bin, dir string, bus bool, extra []string) (*server, error) {
	return startWrapped(nil, bin, dir, bus, extra)
}

func startWrapped(wrap []string, bin, dir string, bus bool, extra []string) (*server, error) {
	var lastErr error
	for range startAttempts {
		port, err := freePort(bus)
		if err != nil {
			return nil, err
		}
		s := &server{bin: bin, port: port, dir: dir, extra: extra, wrap: wrap}
		timeout := startTimeout
		if len(wrap) > 0 {
			timeout *= 2 // valgrind takes seconds to start one
		}
		if lastErr = s.start(timeout); lastErr == nil {
			return s, nil
		}
		if !errors.Is(lastErr, errPortTaken) && !s.portTaken() {
			return nil, lastErr
		}
		_ = os.Remove(s.logPath())
	}
	return nil, lastErr
}

var errExited = errors.New("process exited before answering PING")

// waitPing polls addr with PING until it answers +PONG, the process exits
// (done is closed) or timeout passes.
func waitPing(addr string, done <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	delay := 5 * time.Millisecond
	// Our own process answers on loopback at once; a short timeout lets us
	// notice quickly that it died (e.g. when someone else holds the port).
	pingTimeout := time.Second
	if done != nil {
		pingTimeout = 250 * time.Millisecond
	}
	for {
		select {
		case <-done:
			return errExited
		default:
		}
		err := ping(addr, pingTimeout)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %s: %v", timeout, err)
		}
		select {
		case <-done:
			return errExited
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// ping sends one inline PING and expects +PONG.
func ping(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Processes are started from one goroutine locked to its OS thread for the
// life of the test binary. On Linux the children get PR_SET_PDEATHSIG, which
// fires when the thread that started them exits; pinning that thread makes
// the children die exactly when the test binary dies (timeout panic,
// os.Exit, crash), even when Main's cleanup cannot run.
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

func spawn(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawner.reqs {
				r.err <- r.cmd.Start()
			}
		}()
	})
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	spawner.reqs <- r
	return <-r.err
}

// Process is a dedicated redis-server owned by one test, for fault tests.
// Create it with [StartRedisProcess].
type Process struct {
	tb testing.TB
	s  *server
}

// StartRedisProcess starts a redis-server that only this test uses, on a free
// loopback port with a fresh temporary directory and no persistence unless
// args say otherwise (e.g. "--appendonly", "yes"; later arguments override
// the defaults). It waits until the server answers PING and kills it when the
// test ends. It fails the test if redis-server cannot be found or started.
func StartRedisProcess(tb testing.TB, args ...string) *Process {
	tb.Helper()
	bin, err := findBinary("redis-server")
	if err != nil {
		tb.Fatalf("testenv.StartRedisProcess: %v", err)
	}
	dir := tb.TempDir()
	s, err := startServer(bin, dir, false, append([]string(nil), args...))
	if err != nil {
		tb.Fatalf("testenv.StartRedisProcess: %v", err)
	}
	s.stopWith(tb)
	return &Process{tb: tb, s: s}
}

// StartRedisUnder is StartRedisProcess with the server run under wrap, a
// command line that runs its last arguments in the same process (for example
// valgrind's "valgrind --tool=callgrind --callgrind-out-file=F"), for
// benchmarks that measure Redis itself.
func StartRedisUnder(tb testing.TB, wrap []string, args ...string) *Process {
	tb.Helper()
	bin, err := findBinary("redis-server")
	if err != nil {
		tb.Fatalf("testenv.StartRedisUnder: %v", err)
	}
	s, err := startWrapped(wrap, bin, tb.TempDir(), false, append([]string(nil), args...))
	if err != nil {
		tb.Fatalf("testenv.StartRedisUnder: %v", err)
	}
	s.stopWith(tb)
	return &Process{tb: tb, s: s}
}

// PID is the server process's id.
func (p *Process) PID() int {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.s.cmd.Process.Pid
}

// Addr returns "127.0.0.1:port"; it stays the same across Restart.
func (p *Process) Addr() string { return p.s.addr() }

// Dir returns the server's working directory (AOF, RDB, redis.log).
func (p *Process) Dir() string { return p.s.dir }

// Stop kills the server with SIGKILL (no shutdown, no final save) and waits
// for it to exit. Stopping a stopped server does nothing.
func (p *Process) Stop() {
	p.tb.Helper()
	p.s.kill()
}

// Pause freezes the server with SIGSTOP: connections stay open but nothing
// is answered until Resume.
func (p *Process) Pause() {
	p.tb.Helper()
	if err := p.s.signal(syscall.SIGSTOP); err != nil {
		p.tb.Fatalf("testenv: Pause: %v", err)
	}
}

// Resume continues a paused server with SIGCONT.
func (p *Process) Resume() {
	p.tb.Helper()
	if err := p.s.signal(syscall.SIGCONT); err != nil {
		p.tb.Fatalf("testenv: Resume: %v", err)
	}
}

// RestartAsReplicaOf is Restart with the server made a replica of master
// ("host:port") from its first moment, for this and every later start. It is
// how a dead master without persistence must come back under Sentinel: started
// as a master, it answers empty, and a sentinel that has not yet learned of the
// promotion can make the promoted replica follow it and so wipe every write.
func (p *Process) RestartAsReplicaOf(master string) {
	p.tb.Helper()
	host, port, err := net.SplitHostPort(master)
	if err != nil {
		p.tb.Fatalf("testenv: RestartAsReplicaOf: %v", err)
	}
	p.s.kill()
	p.s.mu.Lock()
	p.s.extra = append(slices.Clone(p.s.extra), "--replicaof", host, port) // later arguments win
	p.s.mu.Unlock()
	if err := p.s.start(restartTimeout); err != nil {
		p.tb.Fatalf("testenv: RestartAsReplicaOf: %v", err)
	}
}

// Restart kills the server if it is running (even if paused) and starts it
// again on the same port and directory, with the same arguments, so it
// reloads whatever it persisted there. It returns once the server answers
// PING.
func (p *Process) Restart() {
	p.tb.Helper()
	p.s.kill()
	if err := p.s.start(restartTimeout); err != nil {
		p.tb.Fatalf("testenv: Restart: %v", err)
	}
}
