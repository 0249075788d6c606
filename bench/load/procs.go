package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// proc is a child process the harness started: redis-server, asyncstatus or the
// baseline. Its output goes to a log file in the harness's temporary directory.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid once done is closed
}

// startProc starts bin with args and env (nil: the harness's own environment).
// The child gets SIGKILL if the harness dies, so no server outlives a crashed run.
func startProc(name, bin string, args, env []string, dir, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// pause and resume stop a server that is not being measured, so that its
// background work (GC, timers, a sweeper) neither steals CPU from the server
// under test nor adds Redis work to its figures.
func (p *proc) pause()  { _ = p.cmd.Process.Signal(syscall.SIGSTOP) }
func (p *proc) resume() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }

// stop asks the process to end (SIGTERM), then kills it after a grace period.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	p.resume()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logHas returns the first line of the process's log that holds each needle found,
// in one pass (asyncstatus writes an access-log line per answer: the log can be large).
func (p *proc) logHas(needles ...string) map[string]string {
	found := map[string]string{}
	f, err := os.Open(p.logPath)
	if err != nil {
		return found
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		for _, n := range needles {
			if _, ok := found[n]; !ok && bytes.Contains(line, []byte(n)) {
				found[n] = truncate(string(line), 300)
			}
		}
	}
	return found
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every Linux
// the harness targets (getconf CLK_TCK).
const clockTicks = 100

// cpuSeconds is the user + system CPU time a process has used so far.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces; fields after it are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// After ")": state(3) ppid(4) ... utime(14) stime(15) => indexes 11 and 12 here.
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(ut+st) / clockTicks, nil
}

// machineBusySeconds is the CPU time all CPUs of the machine have been busy so far
// (the first line of /proc/stat, less idle and iowait).
func machineBusySeconds() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, errors.New("unexpected /proc/stat")
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		// user nice system idle iowait irq softirq steal guest guest_nice; guest time
		// is already counted in user.
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		busy += n
	}
	return float64(busy) / clockTicks, nil
}

// selfCPUSeconds is the harness's own CPU time (the load generator's cost).
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

var ports struct {
	mu   sync.Mutex
	used map[int]bool
}

// freePort picks a loopback port that is free now, below the kernel's ephemeral
// range (so no outgoing connection takes it meanwhile), never 6379, and not
// handed out before by this process.
func freePort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
	hi := ephemeralLow() - 1
	const lo = 15000
	for range 500 {
		p := lo + rand.IntN(max(hi-lo, 1000))
		if p == 6379 || ports.used[p] || p > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		ports.used[p] = true
		return p, nil
	}
	return 0, errors.New("no free loopback port found")
}

func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > 16000 {
				return lo
			}
		}
	}
	return 32768
}

// redisServer is the harness's own redis-server: loopback, a free port, a temporary
// directory, no persistence, every other setting at its default.
type redisServer struct {
	*proc
	addr string
	rdb  *redis.Client // the harness's admin connection (INFO, MEMORY USAGE, FLUSHALL)
}

func findRedisServer() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/bin", "/usr/local/bin", "/usr/sbin", "/opt/homebrew/bin"} {
		p := filepath.Join(dir, "redis-server")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("redis-server not found in PATH, /usr/bin or /usr/local/bin (Debian/Ubuntu: apt-get install redis-server)")
}

func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	bin, err := findRedisServer()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		rdir := filepath.Join(dir, "redis-"+strconv.Itoa(port))
		if err := os.MkdirAll(rdir, 0o755); err != nil {
			return nil, err
		}
		p, err := startProc("redis-server", bin, []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--dir", rdir, "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", ""},
			nil, rdir, filepath.Join(rdir, "redis.log"))
		if err != nil {
			return nil, err
		}
		rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30 * time.Second, PoolSize: 4})
		if err := waitRedis(ctx, rdb, p); err != nil {
			rdb.Close()
			p.stop()
			lastErr = fmt.Errorf("redis-server on %s: %w\n%s", addr, err, p.logTail(10))
			continue
		}
		return &redisServer{proc: p, addr: addr, rdb: rdb}, nil
	}
	return nil, lastErr
}

// waitRedis waits until the redis-server answers PING and checks that the one
// answering is ours (another server may have taken the port first).
func waitRedis(ctx context.Context, rdb *redis.Client, p *proc) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		if p.exited() {
			return fmt.Errorf("exited: %v", p.waitErr)
		}
		if err := rdb.Ping(ctx).Err(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("no PONG within 15s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	if pid := infoFields(info)["process_id"]; pid != strconv.Itoa(p.pid()) {
		return fmt.Errorf("the server answering has pid %s, not ours (%d)", pid, p.pid())
	}
	return nil
}

func (r *redisServer) close() {
	r.rdb.Close()
	r.stop()
}

// info reads INFO sections as a flat field map.
func (r *redisServer) info(ctx context.Context, sections ...string) (map[string]string, error) {
	s, err := r.rdb.Info(ctx, sections...).Result()
	if err != nil {
		return nil, err
	}
	return infoFields(s), nil
}

func infoFields(info string) map[string]string {
	f := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	return f
}

func infoInt(f map[string]string, k string) int64 {
	n, _ := strconv.ParseInt(f[k], 10, 64)
	return n
}

// goBinary is the go command that runs the harness (or the one in PATH).
func goBinary() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// moduleRoot finds the asyncstatus module's directory from the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command(goBinary(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the asyncstatus module: run from its directory")
	}
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	if !strings.Contains(string(b), "module github.com/asyncstatus/asyncstatus") {
		return "", fmt.Errorf("%s is not the asyncstatus module", gomod)
	}
	return filepath.Dir(gomod), nil
}

// build compiles the main package pkg of the module into dir and returns the binary.
func build(ctx context.Context, root, pkg, out string, flags []string) error {
	args := append([]string{"build", "-o", out}, flags...)
	args = append(args, pkg)
	cmd := exec.CommandContext(ctx, goBinary(), args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}
