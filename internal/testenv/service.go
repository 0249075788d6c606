package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ServiceBinary builds cmd/asyncstatus once per test binary and flavour (with
// -race when race is set, which also reuses the packages `go test -race` has
// compiled) into a temporary directory that [Main] removes, and returns its
// path. It fails the test if the build fails.
func ServiceBinary(tb testing.TB, race bool) string {
	tb.Helper()
	requireMain(tb, "ServiceBinary")
	b := &shared.builds[0]
	if race {
		b = &shared.builds[1]
	}
	b.once.Do(func() {
		dir, err := tempDir("build")
		if err != nil {
			b.err = err
			return
		}
		shared.ownDir(dir)
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		b.path = filepath.Join(dir, "asyncstatus")
		args := []string{"build", "-o", b.path}
		if race {
			args = append(args, "-race")
		}
		args = append(args, "github.com/asyncstatus/asyncstatus/cmd/asyncstatus")
		if out, err := exec.Command(gobin, args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if b.err != nil {
		tb.Fatalf("testenv.ServiceBinary: %v", b.err)
	}
	return b.path
}

type serviceBuild struct {
	once sync.Once
	path string
	err  error
}

// ServiceEnviron is the environment of a service process: the test's own
// without any ASYNCSTATUS_ variable (so that CI's test servers never leak into
// the service's configuration), plus env.
func ServiceEnviron(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ASYNCSTATUS_") {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// ServiceCommand runs one asyncstatus command (bin args...) with env to
// completion, within 30 s, and returns its stdout; it fails the test if the
// command fails.
func ServiceCommand(tb testing.TB, bin string, env map[string]string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = ServiceEnviron(env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		tb.Fatalf("asyncstatus %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// Service is one `asyncstatus serve` child process that a test owns, on a
// fixed loopback address that stays the same across [Service.Restart]. Make it
// with [StartService].
type Service struct {
	tb   testing.TB
	bin  string
	env  []string
	addr string
	log  *Buffer // stderr of every run, in order

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit, once done is closed
}

// StartService runs `bin serve` with env (see [ServiceEnviron]) on a free
// loopback port, with the console off, and waits until /healthz answers. At
// the end of the test it is stopped (SIGTERM, then SIGKILL after 15 s) and,
// if the test failed, the last lines of its log are logged.
func StartService(tb testing.TB, bin string, env map[string]string) *Service {
	tb.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(tb))
	e := map[string]string{"ASYNCSTATUS_HTTP_ADDR": addr, "ASYNCSTATUS_CONSOLE_ADDR": "off"}
	for k, v := range env {
		e[k] = v
	}
	s := &Service{tb: tb, bin: bin, env: ServiceEnviron(e), addr: addr, log: &Buffer{}}
	tb.Cleanup(func() {
		s.stop()
		if tb.Failed() {
			log := s.log.String()
			if i := strings.Index(log, "WARNING: DATA RACE"); i >= 0 {
				tb.Logf("service %s log, from its first race report:\n%s", addr, firstLines(log[i:], 200))
			}
			tb.Logf("service %s log (last 60 lines):\n%s", addr, lastLines(log, 60))
		}
	})
	if err := s.start(); err != nil {
		tb.Fatalf("testenv.StartService: %v", err)
	}
	return s
}

func (s *Service) start() error {
	s.mu.Lock()
	cmd := exec.Command(s.bin, "serve")
	cmd.Env = s.env
	cmd.SysProcAttr = sysProcAttr()
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := spawn(cmd); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("starting %s serve: %w", s.bin, err)
	}
	done := make(chan struct{})
	s.cmd, s.done = cmd, done
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(done)
	}()
	s.mu.Unlock()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := hc.Get(s.URL() + "/healthz")
		if err == nil {
			res.Body.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("serve on %s exited: %v\n%s", s.addr, s.exitErr(), lastLines(s.log.String(), 40))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("serve on %s did not answer /healthz within 30s:\n%s", s.addr, lastLines(s.log.String(), 40))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Service) exitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Service) current() (*exec.Cmd, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd, s.done
}

// stop ends the process: SIGTERM, then SIGKILL after 15 s.
func (s *Service) stop() {
	cmd, done := s.current()
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// URL is "http://127.0.0.1:port".
func (s *Service) URL() string { return "http://" + s.addr }

// Addr is "127.0.0.1:port".
func (s *Service) Addr() string { return s.addr }

// PID is the process id of the current run.
func (s *Service) PID() int {
	cmd, _ := s.current()
	return cmd.Process.Pid
}

// Log is everything the service wrote on stdout and stderr, every run.
func (s *Service) Log() string { return s.log.String() }

// Kill sends SIGKILL and waits until the process has exited: no shutdown,
// requests in flight are cut.
func (s *Service) Kill() {
	cmd, done := s.current()
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts the service again, on the same address with the same
// environment, after [Service.Kill] or an exit, and waits until /healthz
// answers.
func (s *Service) Restart() {
	s.tb.Helper()
	if _, done := s.current(); done != nil {
		select {
		case <-done:
		default:
			s.tb.Fatalf("testenv: Restart of the service on %s, which is still running", s.addr)
		}
	}
	if err := s.start(); err != nil {
		s.tb.Fatalf("testenv: Restart: %v", err)
	}
}

// Terminate sends SIGTERM and returns the exit error (nil: status 0), or
// fails the test if the process does not exit within 20 s.
func (s *Service) Terminate() error {
	s.tb.Helper()
	cmd, done := s.current()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.tb.Fatalf("testenv: SIGTERM to the service on %s: %v", s.addr, err)
	}
	select {
	case <-done:
		return s.exitErr()
	case <-time.After(20 * time.Second):
		s.tb.Fatalf("testenv: the service on %s did not exit within 20s of SIGTERM", s.addr)
		return nil
	}
}

// Exited reports whether the current run has ended, and how.
func (s *Service) Exited() (bool, error) {
	_, done := s.current()
	select {
	case <-done:
		return true, s.exitErr()
	default:
		return false, nil
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(len(lines), n)], "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
