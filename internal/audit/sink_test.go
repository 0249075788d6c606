package audit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/audit"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

func batch(from, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		st := domain.StatusQueued
		l, err := audit.Line(domain.AuditEvent{EventID: fmt.Sprintf("evt_%d", from+i), Tenant: "acme", Type: "request.created",
			Seq: 1, To: &st, By: "key_a", Version: 1})
		if err != nil {
			panic(err)
		}
		out[i] = l
	}
	return out
}

// eventIDs reads the event ids of a file's lines, failing on any line that is not JSON.
func eventIDs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		var x struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("%s: not JSON: %q", path, l)
		}
		ids = append(ids, x.EventID)
	}
	return ids
}

// TestFileSinkRotates: the file is rotated before a batch would take it past
// the size, batches are never split across files, and only keep rotated files
// stay, the newest ones.
func TestFileSinkRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	size := int64(len(batch(0, 1)[0]))
	s := audit.NewFileSink(path, 5*size, 2)
	for i := 0; i < 10; i++ { // batches of 2 lines: 2 batches per file
		if err := s.Write(ctx, batch(2*i, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + "*")
	if len(files) != 3 {
		t.Fatalf("files %v, want the file and 2 rotated", files)
	}
	got := map[string][]string{}
	for _, f := range files {
		got[filepath.Base(f)] = eventIDs(t, f)
	}
	want := map[string]string{"audit.log": "evt_16,evt_17,evt_18,evt_19", "audit.log.1": "evt_12,evt_13,evt_14,evt_15",
		"audit.log.2": "evt_8,evt_9,evt_10,evt_11"}
	for f, w := range want {
		if strings.Join(got[f], ",") != w {
			t.Errorf("%s holds %v, want %s", f, got[f], w)
		}
	}
}

// TestFileSinkFailsAndRecovers: a write that cannot be made (no space left:
// /dev/full; a missing directory) is an error, and the sink works once the
// path can be written, appending to what is there.
func TestFileSinkFailsAndRecovers(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err == nil {
		if err := audit.NewFileSink("/dev/full", 1<<20, 1).Write(ctx, batch(0, 3)); err == nil {
			t.Fatal("a write to /dev/full succeeded")
		}
	}
	dir := filepath.Join(t.TempDir(), "later")
	path := filepath.Join(dir, "audit.log")
	s := audit.NewFileSink(path, 1<<20, 1)
	if err := s.Write(ctx, batch(0, 2)); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("write into a missing directory: %v", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, batch(100, 1)[0], 0o640); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, batch(0, 2)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(eventIDs(t, path), ","); got != "evt_100,evt_0,evt_1" {
		t.Fatalf("file holds %s", got)
	}
}

// TestLogSinkMarksLines: each line is one log record marked as audit, with the
// event under "audit".
func TestLogSinkMarksLines(t *testing.T) {
	var buf bytes.Buffer
	if err := audit.NewLogSink(&buf).Write(ctx, batch(0, 2)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%q", buf.String())
	}
	for i, l := range lines {
		var rec struct {
			Time, Level, Msg string
			Audit            struct {
				EventID string `json:"event_id"`
				Tenant  string `json:"tenant"`
			}
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if rec.Msg != "audit" || rec.Level != "INFO" || rec.Time == "" || rec.Audit.EventID != fmt.Sprintf("evt_%d", i) || rec.Audit.Tenant != "acme" {
			t.Fatalf("record %+v", rec)
		}
	}
}
