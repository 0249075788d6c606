package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/asyncstatus/asyncstatus/client"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// cliService is `serve` on the embedded store, polled every second, with a
// client of its demo key to set up requests.
type cliService struct {
	url, key string
	c        *client.Client
}

func startCLIService(t *testing.T) *cliService {
	t.Helper()
	base, out, _ := serving(t, map[string]string{"ASYNCSTATUS_POLLING_SCHEDULE": "1s"})
	m := keyLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no demo key printed:\n%s", out.String())
	}
	c, err := client.New(base, client.WithAPIKey(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return &cliService{url: base, key: m[1], c: c}
}

// env is the environment of a command that talks to s with its key.
func (s *cliService) env() map[string]string {
	return map[string]string{"ASYNCSTATUS_URL": s.url, "ASYNCSTATUS_API_KEY": s.key}
}

func (s *cliService) create(t *testing.T, typ string) *client.Created {
	t.Helper()
	cr, err := s.c.Create(context.Background(), client.CreateParams{Type: typ, Context: map[string]int{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

// runExit runs a command and returns stdout, stderr and its exit status.
func runExit(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	out, errb, err := runCmd(t, env, args...)
	if err == nil {
		return out, errb, 0
	}
	return out, errb + err.Error(), exitCode(err)
}

func wantExit(t *testing.T, want int, env map[string]string, args ...string) (string, string) {
	t.Helper()
	out, errb, code := runExit(t, env, args...)
	if code != want {
		t.Fatalf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errb)
	}
	return out, errb
}

// drive moves request id through processing (with progress) to succeeded, or
// to failed when fail is set, pausing between steps.
func drive(t *testing.T, c *client.Client, id string, pause time.Duration, fail bool) <-chan error {
	ctx := context.Background()
	return testenv.Paced(pause,
		func() error { _, err := c.MarkProcessing(ctx, id, client.NewProgress(10, "page 1 of 3")); return err },
		func() error { _, err := c.Heartbeat(ctx, id, client.NewProgress(66, "page 2 of 3")); return err },
		func() error {
			if fail {
				_, err := c.Fail(ctx, id, "ERR_UPSTREAM", "ledger down")
				return err
			}
			_, err := c.Complete(ctx, id, &client.Link{URL: "https://files.example/s.pdf", ExpiresAt: time.Now().Add(time.Hour)})
			return err
		},
	)
}

func TestRequestsCommands(t *testing.T) {
	s := startCLIService(t)
	env := s.env()
	cr := s.create(t, "cli.test")

	t.Run("Get", func(t *testing.T) {
		out, _ := wantExit(t, 0, env, "requests", "get", cr.ID)
		for _, want := range []string{"id:", cr.ID, "status:", "queued", `context:`, `{"n":1}`, "version:"} {
			if !strings.Contains(out, want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
		}
		// flags after the id, the key by flag, the URL by flag
		out, _ = wantExit(t, 0, map[string]string{}, "requests", "get", cr.ID, "--json", "--url", s.url, "--key", s.key)
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil || m["id"] != cr.ID || m["status"] != "queued" {
			t.Fatalf("--json: %v %s", err, out)
		}
		// a poll token instead of a key
		out, _ = wantExit(t, 0, map[string]string{"ASYNCSTATUS_URL": s.url, "ASYNCSTATUS_POLL_TOKEN": cr.PollToken},
			"requests", "get", "--json", cr.ID)
		if !strings.Contains(out, cr.ID) {
			t.Fatal(out)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		_, errb := wantExit(t, 4, env, "requests", "get", "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a")
		if !strings.Contains(errb, "requests get: NOT_FOUND: ") || !strings.Contains(errb, "(request_id ") {
			t.Fatalf("stderr: %s", errb)
		}
		_, errb = wantExit(t, 4, map[string]string{"ASYNCSTATUS_URL": s.url, "ASYNCSTATUS_API_KEY": "ask_bogus"}, "requests", "list")
		if !strings.Contains(errb, "UNAUTHENTICATED") {
			t.Fatalf("stderr: %s", errb)
		}
		_, errb = wantExit(t, 4, map[string]string{"ASYNCSTATUS_URL": s.url, "ASYNCSTATUS_POLL_TOKEN": cr.PollToken}, "requests", "list")
		if !strings.Contains(errb, "UNAUTHENTICATED") {
			t.Fatalf("a poll token listed: %s", errb)
		}
		_, errb = wantExit(t, 4, map[string]string{"ASYNCSTATUS_URL": "http://127.0.0.1:1"}, "requests", "get", cr.ID)
		if !strings.Contains(errb, "connection refused") {
			t.Fatalf("stderr: %s", errb)
		}
	})
	t.Run("List", func(t *testing.T) {
		for range 3 {
			s.create(t, "cli.list")
		}
		x := s.create(t, "cli.list")
		if _, err := s.c.Cancel(context.Background(), x.ID, ""); err != nil {
			t.Fatal(err)
		}
		out, _ := wantExit(t, 0, env, "requests", "list", "--type", "cli.list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 5 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], x.ID) || !strings.Contains(lines[1], "cancelled") {
			t.Fatalf("list:\n%s", out)
		}
		out, _ = wantExit(t, 0, env, "requests", "list", "--type", "cli.list", "--limit", "3", "--json")
		var page struct{ Items []map[string]any }
		if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Items) != 3 {
			t.Fatalf("--limit 3 --json: %v %s", err, out)
		}
		out, _ = wantExit(t, 0, env, "requests", "list", "--type", "cli.list", "--status", "cancelled,failed", "--json")
		if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Items) != 1 || page.Items[0]["id"] != x.ID {
			t.Fatalf("--status: %v %s", err, out)
		}
		lab, err := s.c.Create(context.Background(), client.CreateParams{Type: "cli.list", Labels: map[string]string{"env": "prod", "team": "a"}})
		if err != nil {
			t.Fatal(err)
		}
		out, _ = wantExit(t, 0, env, "requests", "list", "--label-selector", "team=a,env=prod", "--json")
		if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Items) != 1 || page.Items[0]["id"] != lab.ID {
			t.Fatalf("--label-selector: %v %s", err, out)
		}
		_, errb := wantExit(t, 4, env, "requests", "list", "--label-selector", "Env=x")
		if !strings.Contains(errb, "VALIDATION_FAILED") {
			t.Fatal(errb)
		}
		_, errb = wantExit(t, 4, env, "requests", "list", "--status", "bogus")
		if !strings.Contains(errb, "VALIDATION_FAILED") {
			t.Fatal(errb)
		}
	})
	t.Run("Events", func(t *testing.T) {
		x := s.create(t, "cli.events")
		if _, err := s.c.Cancel(context.Background(), x.ID, ""); err != nil {
			t.Fatal(err)
		}
		out, _ := wantExit(t, 0, env, "requests", "events", x.ID)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.Contains(lines[1], "queued") || !strings.Contains(lines[2], "cancelled") {
			t.Fatalf("events:\n%s", out)
		}
		out, _ = wantExit(t, 0, env, "requests", "events", x.ID, "--json")
		var evs struct{ Items []map[string]any }
		if err := json.Unmarshal([]byte(out), &evs); err != nil || len(evs.Items) != 2 || evs.Items[0]["from"] != nil ||
			evs.Items[1]["to"] != "cancelled" || !strings.HasSuffix(evs.Items[0]["at"].(string), "Z") {
			t.Fatalf("--json: %v %s", err, out)
		}
	})
	t.Run("WaitSucceeded", func(t *testing.T) {
		x := s.create(t, "cli.wait")
		done := drive(t, s.c, x.ID, 300*time.Millisecond, false)
		out, errb := wantExit(t, 0, env, "requests", "wait", x.ID, "--json")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil || m["status"] != "succeeded" || m["result_type"] != "link" {
			t.Fatalf("stdout is not the final representation alone: %v\n%s", err, out)
		}
		// stderr is not a terminal: one line per change, the last one the end
		lines := strings.Split(strings.TrimSpace(errb), "\n")
		if len(lines) < 2 || !strings.Contains(lines[len(lines)-1], " succeeded") || strings.Contains(errb, "\r") {
			t.Fatalf("stderr:\n%q", errb)
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "20") || !strings.Contains(l, "Z ") {
				t.Fatalf("line %q", l)
			}
		}
	})
	t.Run("WaitFailed", func(t *testing.T) {
		x := s.create(t, "cli.wait")
		done := drive(t, s.c, x.ID, 100*time.Millisecond, true)
		out, errb := wantExit(t, 1, env, "requests", "wait", x.ID)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "ERR_UPSTREAM") || !strings.Contains(errb, "failed: ERR_UPSTREAM: ledger down") {
			t.Fatalf("stdout %s\nstderr %s", out, errb)
		}
		y := s.create(t, "cli.wait")
		if _, err := s.c.Cancel(context.Background(), y.ID, "no longer needed"); err != nil {
			t.Fatal(err)
		}
		_, errb = wantExit(t, 1, env, "requests", "wait", y.ID)
		if !strings.Contains(errb, "cancelled: no longer needed") {
			t.Fatal(errb)
		}
	})
	t.Run("WaitTimeout", func(t *testing.T) {
		x := s.create(t, "cli.wait")
		out, errb := wantExit(t, 3, env, "requests", "wait", x.ID, "--timeout", "1500ms", "--json")
		if out != "" || !strings.Contains(errb, "--timeout 1.5s passed; the request is queued") {
			t.Fatalf("stdout %q\nstderr %s", out, errb)
		}
		_, errb = wantExit(t, 4, env, "requests", "wait", "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", "--timeout", "5s")
		if !strings.Contains(errb, "NOT_FOUND") {
			t.Fatal(errb)
		}
	})
}

func TestRequestsUsage(t *testing.T) {
	env := map[string]string{"ASYNCSTATUS_URL": "http://127.0.0.1:1"}
	for _, args := range [][]string{
		{"requests", "--help"}, {"requests", "-h"}, {"requests", "help"},
		{"requests", "get", "--help"}, {"requests", "list", "-h"}, {"requests", "events", "--help"}, {"requests", "wait", "--help"},
	} {
		out, _ := wantExit(t, 0, env, args...)
		if !strings.Contains(out, "asyncstatus requests wait ID [--timeout DURATION] [--json]") {
			t.Fatalf("%v printed %q", args, out)
		}
	}
	for _, args := range [][]string{
		{"requests"}, {"requests", "bogus"}, {"requests", "get"}, {"requests", "get", "a", "b"}, {"requests", "events"},
		{"requests", "wait"}, {"requests", "get", "x", "--bogus"}, {"requests", "list", "stray"},
		{"requests", "list", "--limit", "0"}, {"requests", "list", "--limit", "many"},
		{"requests", "wait", "x", "--timeout", "-1s"}, {"requests", "wait", "x", "--timeout", "soon"},
		{"requests", "get", "x", "--url", "not a url"},
	} {
		_, errb := wantExit(t, 2, env, args...)
		if !strings.Contains(errb, "requests") {
			t.Fatalf("%v: %s", args, errb)
		}
	}
	out, _ := wantExit(t, 0, env, "--help")
	if !strings.Contains(out, "asyncstatus requests") {
		t.Fatalf("the main usage does not name requests:\n%s", out)
	}
}

// openPTY opens a pseudo-terminal pair of 80 columns (the terminal side is
// what `requests wait` writes to; the controller side is what a person sees).
func openPTY(t *testing.T) (ctrl, term *os.File) {
	t.Helper()
	ctrl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { ctrl.Close() })
	if err := unix.IoctlSetPointerInt(int(ctrl.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(ctrl.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	if err := unix.IoctlSetWinsize(int(term.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatal(err)
	}
	return ctrl, term
}

// TestRequestsWaitBarOnTerminal: on a terminal, wait draws a bar that
// redraws itself in place (carriage return, clear line) and ends on its own
// line; stdout still gets the final representation alone.
func TestRequestsWaitBarOnTerminal(t *testing.T) {
	s := startCLIService(t)
	ctrl, term := openPTY(t)
	var screen strings.Builder
	var mu sync.Mutex
	read := make(chan struct{})
	go func() {
		defer close(read)
		b := make([]byte, 4096)
		for {
			n, err := ctrl.Read(b)
			mu.Lock()
			screen.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	x := s.create(t, "cli.bar")
	done := drive(t, s.c, x.ID, 1200*time.Millisecond, false)
	var out syncBuffer
	err := run(context.Background(), []string{"requests", "wait", x.ID, "--json"}, envOf(s.env()), &out, term)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out.String()), &m); err != nil || m["status"] != "succeeded" {
		t.Fatalf("stdout: %v %s", err, out.String())
	}
	// Read what the terminal got: wait for the final line.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := screen.String()
		mu.Unlock()
		if strings.HasSuffix(got, "\r\n") && strings.Contains(got, "succeeded") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("terminal got %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	got := screen.String()
	mu.Unlock()
	t.Logf("terminal received %q", got)
	frames := strings.Split(strings.TrimSuffix(got, "\r\n"), "\r\x1b[K")
	if frames[0] != "" || len(frames) < 3 {
		t.Fatalf("not a redrawn bar: %q", got)
	}
	frames = frames[1:]
	if strings.Contains(strings.Join(frames, ""), "\n") {
		t.Fatalf("the bar left lines behind: %q", got)
	}
	last := frames[len(frames)-1]
	if !strings.HasPrefix(last, "[##############################] 100% succeeded") {
		t.Fatalf("last frame %q", last)
	}
	seen66 := false
	for _, f := range frames {
		if len(f) > 80 {
			t.Fatalf("frame wider than the terminal: %q", f)
		}
		if f == "[###################-----------]  66% processing page 2 of 3" {
			seen66 = true
		}
	}
	if !seen66 {
		t.Fatalf("no frame of 66%%: %q", frames)
	}
}
