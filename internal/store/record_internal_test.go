package store

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	lua "github.com/asyncstatus/asyncstatus/scripts/lua"
)

func TestRecordRoundTrip(t *testing.T) {
	u := uuid.Must(uuid.NewV7())
	id := u.String()
	ca, ok := idMillis(id)
	if !ok || ca != uuidTime(u).UnixMilli() {
		t.Fatalf("idMillis %d %v, want %d", ca, ok, uuidTime(u).UnixMilli())
	}
	rec := newRecord("statement.export", "key_a", json.RawMessage(`{"a":1}`), "")
	r, err := decodeRecord(id, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != domain.StatusQueued || r.Version != 1 || r.Type != "statement.export" || r.CreatedBy != "key_a" ||
		string(r.Context) != `{"a":1}` || r.Progress != nil || r.Result != nil || r.CompletedAt != nil || r.ExpiresAt != nil ||
		!r.UpdatedAt.Equal(r.CreatedAt.Time) || r.CreatedAt.UnixMilli() != ca || len(r.Events) != 1 || r.Events[0].From != nil {
		t.Fatalf("decoded %+v", r)
	}

	// as transition.lua leaves a completed record: events after the first, one by
	// another key, times as offsets from created_at
	f := strings.Split(rec, "\x1f")
	f[fStatus], f[fVersion], f[fExpires], f[fUpdated], f[fCompleted] = "s", "3", "1900000000000", "4512", "4512"
	f[fEvents] = "p412,s4512@system"
	f[fResultType], f[fResult], f[fProgress] = "answer", `{"v":[1,2]}`, `{"percent":40}`
	r, err = decodeRecord(id, strings.Join(f, "\x1f"), true)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Done || r.Version != 3 || r.UpdatedAt.UnixMilli() != ca+4512 || r.CompletedAt.UnixMilli() != ca+4512 ||
		r.ExpiresAt.UnixMilli() != 1900000000000 || string(r.Result) != `{"v":[1,2]}` || string(r.Progress) != `{"percent":40}` ||
		r.Context == nil || r.Failure != nil || r.Cancellation != nil {
		t.Fatalf("decoded %+v", r)
	}
	ev := r.Events
	if len(ev) != 3 || ev[1].To != domain.StatusProcessing || *ev[1].From != domain.StatusQueued || ev[1].By != "key_a" ||
		ev[1].At.UnixMilli() != ca+412 || ev[2].To != domain.StatusSucceeded || *ev[2].From != domain.StatusProcessing ||
		ev[2].By != "system" || ev[2].Seq != 3 {
		t.Fatalf("events %+v", ev)
	}
	// members must not share backing bytes with each other's appends
	r.Context = append(r.Context, '!')
	if string(r.Progress) != `{"percent":40}` {
		t.Fatal("json members overlap")
	}
	if r2, _ := decodeRecord(id, strings.Join(f, "\x1f"), false); r2.Events != nil {
		t.Fatal("events decoded without withEvents")
	}
}

func TestDecodeRecordRejectsGarbage(t *testing.T) {
	id := uuid.Must(uuid.NewV7()).String()
	for _, rec := range []string{"", "q", "x\x1f1\x1ft\x1f\x1fb\x1f0\x1f\x1f\x1f\x1f\x1f\x1f\x1f\x1f", strings.Repeat("\x1f", 12)} {
		if _, err := decodeRecord(id, rec, true); err == nil {
			t.Errorf("decodeRecord(%q) accepted", rec)
		}
	}
	if _, err := decodeRecord("not-an-id", newRecord("x", "k", nil, ""), true); err == nil {
		t.Error("a record under a bad id decoded")
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(newRecord("x", "key_a", json.RawMessage(`{}`), ""))
	f.Add("s\x1f2\x1fx\x1f\x1fb\x1f-5\x1f9\x1fs,p,@,x1@\x1f\x1f\x1f\x1f\x1f\x1f")
	id := uuid.Must(uuid.NewV7()).String()
	f.Fuzz(func(t *testing.T, rec string) {
		_, _ = decodeRecord(id, rec, true) // must not panic
	})
}

// FuzzRecordValues: whatever a client puts in the JSON members, the record's
// separator (byte 31) cannot appear in them (encoding/json escapes control
// characters, and validated JSON cannot hold them raw), so every member comes
// back as it went in.
func FuzzRecordValues(f *testing.F) {
	f.Add("plain", "msg")
	f.Add("\x1f", "\x1f\x1e\x00")
	f.Add(`"quoted" \ back`, "\u2028")
	id := uuid.Must(uuid.NewV7()).String()
	f.Fuzz(func(t *testing.T, a, b string) {
		ctxJSON, _ := json.Marshal(map[string]string{"a": a})
		result, _ := json.Marshal(map[string]any{"b": b, "n": len(b)})
		if strings.ContainsRune(string(ctxJSON), recordSep) || strings.ContainsRune(string(result), recordSep) {
			t.Fatalf("separator inside encoded JSON: %q %q", ctxJSON, result)
		}
		rec := strings.Split(newRecord("x", "key_a", ctxJSON, ""), "\x1f")
		rec[fStatus], rec[fResultType], rec[fResult], rec[fCompleted] = "s", "answer", string(result), "1"
		r, err := decodeRecord(id, strings.Join(rec, "\x1f"), true)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Context) != string(ctxJSON) || string(r.Result) != string(result) || r.ResultType != "answer" || r.Type != "x" {
			t.Fatalf("round trip: %+v", r)
		}
	})
}

// FuzzValidID holds the byte scan to its definition: a string that parses as a
// UUID and prints back as itself.
func FuzzValidID(f *testing.F) {
	f.Add(uuid.Must(uuid.NewV7()).String())
	f.Add(strings.ToUpper(uuid.Must(uuid.NewV7()).String()))
	f.Add("01936f7e8a3c7b519a562f3c1e0d4b7a")
	f.Add("{01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a}")
	f.Add("01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7g")
	f.Add("01936f7e+8a3c-7b51-9a56-2f3c1e0d4b7a")
	f.Fuzz(func(t *testing.T, id string) {
		u, err := uuid.Parse(id)
		want := err == nil && u.String() == id
		if got := validID(id); got != want {
			t.Fatalf("validID(%q) = %v, want %v", id, got, want)
		}
	})
}

// TestRecordLayoutConstants: the scripts cut a record with the constants
// record.go hands them and find each field where Go put it, on every backend;
// and rec_head's own pattern still finds status, type and expires_at.
func TestRecordLayoutConstants(t *testing.T) {
	if fStatus != 0 || fType != 2 || fExpires != 3 {
		t.Fatalf("rec_head (lib.lua) reads fields 1, 3 and 4; record.go moved them")
	}
	lib, err := fs.ReadFile(lua.FS, "lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	body := "--- @include \"rec_split\"\n--- @include \"rec_join\"\n--- @include \"rec_head\"\n" +
		"local f = rec_split(ARGV[1])\n" +
		"local st, typ, ex = rec_head(ARGV[1])\n" +
		"return {#f, f[F_STATUS], f[F_TYPE], f[F_CREATED_BY], f[F_CONTEXT], f[F_CANCELLATION], rec_join(f) == ARGV[1] and 1 or 0, st, typ, ex}"
	src, err := assemble(string(lib), body, recordConstants())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(src, "F_STATUS") || !strings.Contains(src, "f[1]") {
		t.Fatalf("field positions not written in as numbers:\n%s", src)
	}
	rec := newRecord("report.v1", "key_a", []byte(`{"a":1}`), "")
	want := []any{int64(recordFields), "q", "report.v1", "key_a", `{"a":1}`, "", int64(1), "q", "report.v1", ""}
	evalOnEveryBackend(t, src, want, rec)
}
