package logbuf_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/httpapi/logbuf"
)

// recorder keeps every Write it receives, separately.
type recorder struct {
	mu     sync.Mutex
	writes []string
	fail   error
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) all() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.writes, ""), len(r.writes)
}

func TestBatchesAndFlushesOnClose(t *testing.T) {
	var r recorder
	w := logbuf.New(&r, time.Hour, 1024)
	for i := range 10 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if out, n := r.all(); n != 0 || out != "" {
		t.Fatalf("written before a flush: %d writes %q", n, out)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, n := r.all()
	if n != 1 || strings.Count(out, "\n") != 10 || !strings.HasPrefix(out, "line 0\n") {
		t.Fatalf("after Close: %d writes %q", n, out)
	}
	// after Close, writes go straight through
	fmt.Fprintf(w, "late\n")
	if out, n := r.all(); n != 2 || !strings.HasSuffix(out, "late\n") {
		t.Fatalf("after Close: %d writes %q", n, out)
	}
	if err := w.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

func TestFlushesOnTimer(t *testing.T) {
	var r recorder
	w := logbuf.New(&r, 10*time.Millisecond, 1024)
	defer w.Close()
	fmt.Fprintf(w, "tick\n")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if out, _ := r.all(); out == "tick\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the timer never flushed")
		}
	}
}

// TestNeverSplitsLines: a full buffer is written before the line that would
// overflow it, and a line larger than the buffer goes out on its own.
func TestNeverSplitsLines(t *testing.T) {
	var r recorder
	w := logbuf.New(&r, time.Hour, 16)
	for _, l := range []string{"aaaaaa\n", "bbbbbb\n", "cccccc\n", strings.Repeat("d", 40) + "\n", "e\n"} {
		if n, err := w.Write([]byte(l)); n != len(l) || err != nil {
			t.Fatalf("Write %q: %d %v", l, n, err)
		}
	}
	_ = w.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	want := []string{"aaaaaa\nbbbbbb\n", "cccccc\n", strings.Repeat("d", 40) + "\n", "e\n"}
	if fmt.Sprint(r.writes) != fmt.Sprint(want) {
		t.Fatalf("writes %q, want %q", r.writes, want)
	}
}

// TestDirectKeepsOrder: a direct line goes out at once, after the pending ones.
func TestDirectKeepsOrder(t *testing.T) {
	var r recorder
	w := logbuf.New(&r, time.Hour, 1024)
	defer w.Close()
	fmt.Fprint(w, "1\n")
	fmt.Fprint(w, "2\n")
	fmt.Fprint(w.Direct(), "warn\n")
	if out, n := r.all(); out != "1\n2\nwarn\n" || n != 1 {
		t.Fatalf("%d writes %q", n, out)
	}
	fmt.Fprint(w.Direct(), "error\n")
	if out, n := r.all(); out != "1\n2\nwarn\nerror\n" || n != 2 {
		t.Fatalf("%d writes %q", n, out)
	}
}

func TestConcurrentWriters(t *testing.T) {
	var r recorder
	w := logbuf.New(&r, time.Millisecond, 256)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if g == 0 && i%50 == 0 {
					fmt.Fprintf(w.Direct(), "g%d line %03d\n", g, i)
					continue
				}
				fmt.Fprintf(w, "g%d line %03d\n", g, i)
			}
		})
	}
	wg.Wait()
	_ = w.Close()
	out, _ := r.all()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		if len(l) != len("g0 line 000") {
			t.Fatalf("mangled line %q", l)
		}
	}
}

func TestWriteError(t *testing.T) {
	r := recorder{fail: errors.New("disk full")}
	w := logbuf.New(&r, time.Hour, 8)
	defer w.Close()
	fmt.Fprint(w, "12345\n")
	if _, err := w.Write([]byte("67890\n")); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("overflowing Write: %v", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("the failed lines are dropped, not retried: %v", err)
	}
}
