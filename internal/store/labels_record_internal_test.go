package store

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
	lua "github.com/asyncstatus/asyncstatus/scripts/lua"
)

// TestRecordLabels: labels are the record's field before the kept trace
// context, in their canonical spelling; a record written before labels (two
// fields less) or before tracing (one less) still decodes, in Go and in the
// scripts, as one without labels or trace context, and a script that rewrites
// it writes the full layout.
func TestRecordLabels(t *testing.T) {
	id := uuid.Must(uuid.NewV7()).String()
	rec := newRecord("x", "key_a", []byte(`{"a":1}`), "env=prod,team=b")
	r, err := decodeRecord(id, rec, false)
	if err != nil || r.Labels != "env=prod,team=b" || string(r.Context) != `{"a":1}` {
		t.Fatalf("%+v %v", r, err)
	}
	pretrace := strings.TrimSuffix(rec, "\x1f")
	r, err = decodeRecord(id, pretrace, false)
	if err != nil || r.Labels != "env=prod,team=b" || r.TraceContext != "" {
		t.Fatalf("record before tracing: %+v %v", r, err)
	}
	old := strings.TrimSuffix(newRecord("x", "key_a", []byte(`{"a":1}`), ""), "\x1f\x1f")
	old = strings.Replace(old, "q\x1f", "c\x1f", 1) + `{"reason":"r"}` // cancelled, cancellation last
	if strings.Count(old, "\x1f") != recordFields-3 {
		t.Fatalf("old record has %d separators", strings.Count(old, "\x1f"))
	}
	r, err = decodeRecord(id, old, false)
	if err != nil || r.Labels != "" || string(r.Cancellation) != `{"reason":"r"}` || string(r.Context) != `{"a":1}` {
		t.Fatalf("old record: %+v %v", r, err)
	}

	lib, err := fs.ReadFile(lua.FS, "lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	body := "--- @include \"rec_split\"\n--- @include \"rec_join\"\n" +
		"local f = rec_split(ARGV[1])\n" +
		"return {#f, f[F_CANCELLATION], f[F_LABELS], rec_join(f)}"
	src, err := assemble(string(lib), body, recordConstants())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			for _, c := range []struct{ in, cancel, labels, joined string }{
				{rec, "", "env=prod,team=b", rec},
				{pretrace, "", "env=prod,team=b", rec},
				{old, `{"reason":"r"}`, "", old + "\x1f\x1f"},
			} {
				got, err := b.Client(t).Eval(context.Background(), src, []string{"{t}k"}, c.in).Slice()
				if err != nil {
					t.Fatal(err)
				}
				want := []any{int64(recordFields), c.cancel, c.labels, c.joined}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("got %q, want %q", got, want)
				}
			}
		})
	}
}
