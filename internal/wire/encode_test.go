package wire_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// tricky strings: HTML characters, escapes, control bytes, unicode, U+2028/9,
// invalid UTF-8.
var encodeStrings = []string{
	"", "statement.export", "key_4f2a", "ünïcødé ✓ 日本語 🎉", `quote " backslash \ slash /`,
	"<script>alert('x')</script> & co", "line\nbreak\ttab\rcr\bbs\fff", "\x00\x01\x1f\x7f",
	"sep\u2028par\u2029end", "bad \xff\xfe utf8 \xe2\x80", "emoji \U0001F600 and \u00e9",
}

// valid JSON texts as a client may send them and as the store keeps them.
var encodeRaws = []string{
	"", `{}`, `[]`, `null`, `0`, `"s"`, `{"percent":42,"message":"Exporting statements"}`,
	`{"a": 1, "b": [1, 2, 3]}`, "{\n  \"x\" : true\n}", `{"html":"<b>bold</b> & more"}`,
	`{"sep":"a` + "\u2028" + `b` + "\u2029" + `"}`, `{"esc":"\" \\ \u0041 \n"}`, `{"uni":"日本 ✓"}`,
	`[{"code":"ERR_X","message":"failed: x > y"}]`, `{"k":"v with spaces","n":-1.5e10}`, `"\u003c"`,
	"{\"bad\":\"\xff\xe2\x80\"}", "{\"dash\":\"a\u2013b\"}",
}

func encodeCase(rng *rand.Rand) domain.Request {
	pick := func(v []string) string { return v[rng.IntN(len(v))] }
	raw := func() json.RawMessage {
		if s := pick(encodeRaws); s != "" {
			return json.RawMessage(s)
		}
		return nil
	}
	tm := func() domain.Time {
		return domain.TimeMs(rng.Int64N(4102444800000)) // 1970..2100
	}
	r := domain.Request{
		ID: pick(encodeStrings), Type: pick(encodeStrings), Status: domain.Statuses[rng.IntN(len(domain.Statuses))],
		Progress: raw(), Context: raw(), ResultType: pick(encodeStrings), Result: raw(), Failure: raw(),
		CreatedBy: pick(encodeStrings), CreatedAt: tm(), UpdatedAt: tm(), Version: rng.Int64() - rng.Int64(),
		Cancellation: raw(), PollToken: pick(encodeStrings),
		Events: []domain.Event{{Seq: 1, At: tm(), To: domain.StatusQueued, By: "k"}},
	}
	r.Done = r.Status.Terminal()
	if rng.IntN(2) == 0 {
		t := tm()
		r.CompletedAt = &t
	}
	if rng.IntN(2) == 0 {
		t := tm()
		r.ExpiresAt = &t
	}
	if rng.IntN(8) == 0 {
		r.CreatedAt = domain.Time{} // the zero time
	}
	if rng.IntN(8) == 0 { // a non-UTC location: written in UTC
		r.UpdatedAt = domain.Time{Time: time.Date(2026, 3, 1, 12, 30, 0, 123456789, time.FixedZone("x", 3600))}
	}
	return r
}

// TestAppendRequest proves AppendRequest writes exactly what encoding/json writes.
func TestAppendRequest(t *testing.T) {
	check := func(r *domain.Request) {
		t.Helper()
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("prefix")
		got, err := wire.AppendRequest(prefix, r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("AppendRequest differs from encoding/json:\n got %s\nwant %s", got[len(prefix):], want)
		}
	}
	// every status, members absent and present
	now := domain.TimeMs(1764442800123)
	for _, st := range domain.Statuses {
		check(&domain.Request{ID: "0b9d6d8e-2f5c-4b8e-9a57-3f1c2d4e5f60", Type: "statement.export", Status: st,
			Done: st.Terminal(), CreatedBy: "key_a", CreatedAt: now, UpdatedAt: now, Version: 1})
		check(&domain.Request{ID: "0b9d6d8e-2f5c-4b8e-9a57-3f1c2d4e5f60", Type: "statement.export", Status: st,
			Done: st.Terminal(), Progress: json.RawMessage(`{"percent":50}`), Context: json.RawMessage(`{"account":"acc_1"}`),
			ResultType: "statement", Result: json.RawMessage(`{"url":"https://x.example/a?b=1&c=2"}`),
			Failure: json.RawMessage(`{"code":"E","message":"m"}`), CreatedBy: "key_a", CreatedAt: now, UpdatedAt: now,
			CompletedAt: &now, ExpiresAt: &now, Version: 7, Cancellation: json.RawMessage(`{"reason":"user"}`), PollToken: "pt.x-y_z"})
	}
	check(&domain.Request{}) // the zero request
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		r := encodeCase(rng)
		check(&r)
	}
}

// TestAppendRequestInvalidRaw: a member that is not JSON fails like encoding/json
// when it is not copied verbatim.
func TestAppendRequestInvalidRaw(t *testing.T) {
	r := &domain.Request{Context: json.RawMessage(`{"a": }`)}
	if _, err := json.Marshal(r); err == nil {
		t.Fatal("encoding/json accepted it")
	}
	if _, err := wire.AppendRequest(nil, r); err == nil {
		t.Fatal("AppendRequest accepted it")
	}
}

func BenchmarkAppendRequest(b *testing.B) {
	now := domain.TimeMs(1764442800123)
	r := &domain.Request{ID: "0b9d6d8e-2f5c-4b8e-9a57-3f1c2d4e5f60", Type: "statement.export", Status: domain.StatusProcessing,
		Progress:  json.RawMessage(`{"percent":42,"message":"Exporting statements for March","step":3,"steps":7}`),
		Context:   json.RawMessage(`{"account":"acc_881204","period":{"from":"2026-03-01","to":"2026-03-31"},"format":"pdf"}`),
		CreatedBy: "key_a", CreatedAt: now, UpdatedAt: now, ExpiresAt: &now, Version: 2}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendRequest", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			var err error
			if buf, err = wire.AppendRequest(buf[:0], r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAppendTimeLikeFormat: the hand-written TimeLayout is AppendFormat's, for
// every year AppendFormat writes with four digits and around them.
func TestAppendTimeLikeFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	zones := []*time.Location{time.UTC, time.FixedZone("x", -11*3600-1800), time.FixedZone("y", 14*3600)}
	for i := range 20000 {
		tm := time.Unix(rng.Int64N(253402300800+2*86400)-86400-62135596800, rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])
		switch i {
		case 0:
			tm = time.Time{}
		case 1:
			tm = time.Date(-1, 12, 31, 23, 59, 59, 999999999, time.UTC)
		case 2:
			tm = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		want, _ := json.Marshal(struct{ T string }{tm.UTC().Format(domain.TimeLayout)})
		r := &domain.Request{CreatedAt: domain.Time{Time: tm}}
		got, err := wire.AppendRequest(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		if w := `"created_at":` + string(want[5:len(want)-1]); !bytes.Contains(got, []byte(w)) {
			t.Fatalf("%v: got %s, want %s", tm, got, w)
		}
	}
}
