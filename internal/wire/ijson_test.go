package wire

import (
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// TestIJSON: bodies that are not I-JSON (RFC 7493) answer VALIDATION_FAILED
// naming the field, on every body decoder, by the fast path and the slow one
// alike; member names match exactly, and an escaped name is the same name.
func TestIJSON(t *testing.T) {
	decoders := map[string]func([]byte) error{
		"create":   func(b []byte) error { _, err := DecodeCreate(b, refLimits); return err },
		"complete": func(b []byte) error { _, err := DecodeComplete(b, refLimits); return err },
		"progress": func(b []byte) error { _, err := DecodeProgress(b); return err },
		"fail":     func(b []byte) error { _, err := DecodeFail(b); return err },
		"cancel":   func(b []byte) error { _, err := DecodeCancel(b); return err },
		"webhook":  func(b []byte) error { _, err := DecodeWebhook(b); return err },
	}
	for _, c := range []struct {
		decoder, body, field string // field "": accepted
	}{
		{"create", `{"type":"x","context":{"a":"` + "\xff\xfe" + `","n":1}}`, "context.a"},
		{"create", `{"type":"x","context":{"a":"ok","n":1e309}}`, "context.n"},
		{"create", `{"type":"x","context":{"n":-1e309}}`, "context.n"},
		{"create", `{"type":"x","context":{"n":` + strings.Repeat("9", 400) + `}}`, "context.n"},
		{"create", `{"type":"x","context":{"n":1e-400,"m":1.7976931348623157e308}}`, ""},
		{"create", `{"type":"x","context":{"a":1,"a":2}}`, "context.a"},
		{"create", `{"type":"x","context":{"a":1,"\u0061":2}}`, "context.a"},
		{"create", `{"type":"x","context":{"l":[{"b":1},{"b":1,"b":2}]}}`, "context.l[1].b"},
		{"create", `{"type":"x","type":"x"}`, "type"},
		{"create", `{"type":"x","\u0074ype":"y"}`, "type"},
		{"create", `{"TYPE":"x"}`, "TYPE"},
		{"create", `{"type":"x","Context":{}}`, "Context"},
		{"create", `{"\u0074ype":"x"}`, ""},
		{"create", `{"type":"x","context":{"` + "\xff" + `":1}}`, "context"}, // in a member name
		{"create", `{"type":"x","context":{"s":"\ud800"}}`, "context.s"},
		{"create", `{"type":"x","context":{"s":"\udc00\ud800"}}`, "context.s"},
		{"create", `{"type":"x","context":{"s":"\ud83d\ude00 \u00e9"}}`, ""},
		{"create", `{"type":"x","context":{"s":"` + "\xed\xa0\x80" + `"}}`, "context.s"}, // an encoded surrogate
		{"create", "{\"type\":\"x\xff\"}", "type"},
		{"create", `{"type":"x","estimated_duration_seconds":1e400}`, "estimated_duration_seconds"},
		{"complete", `{"result_type":"answer","result":{"k":"` + "\xc3" + `"}}`, "result.k"},
		{"complete", `{"result_type":"answer","result":{"k":1,"k":1}}`, "result.k"},
		{"complete", `{"result_type":"link","result":{"URL":"https://f.example/x","expires_at":"2026-11-30T10:00:00Z"}}`, "result.URL"},
		{"complete", `{"result_type":"confirmation","result":{"confirmed":true,"confirmed":false}}`, "result.confirmed"},
		{"complete", `{"Result_type":"answer","result":{}}`, "Result_type"},
		{"progress", `{"message":"` + "\xff" + `"}`, "message"},
		{"progress", `{"percent":1,"percent":2}`, "percent"},
		{"progress", `{"Percent":1}`, "Percent"},
		{"fail", `{"code":"E","reason":"` + "\x80" + `"}`, "reason"},
		{"fail", `{"CODE":"E"}`, "CODE"},
		{"cancel", `{"reason":"a","reason":"b"}`, "reason"},
		{"cancel", `{"Reason":"a"}`, "Reason"},
		{"webhook", `{"url":"https://h.example/","events":["request.failed"],"events":[]}`, "events"},
		{"webhook", `{"url":"https://h.example/","description":"` + "\xfe" + `"}`, "description"},
		{"webhook", `{"URL":"https://h.example/"}`, "URL"},
	} {
		err := decoders[c.decoder]([]byte(c.body))
		if c.field == "" {
			if err != nil {
				t.Errorf("%s %q: %v, want it accepted", c.decoder, c.body, err)
			}
			continue
		}
		e, ok := err.(*domain.Error)
		if !ok || e.Code != domain.ValidationFailed || len(e.Fields) == 0 || e.Fields[0].Field != c.field {
			t.Errorf("%s %q: %#v, want VALIDATION_FAILED naming %s", c.decoder, c.body, err, c.field)
		}
	}
}

// TestNoncharacters: I-JSON (RFC 7493 §2.1) forbids Unicode noncharacters, raw
// or escaped, in values and member names; every decoder answers 400 naming
// the field, by the fast path and the slow one alike.
func TestNoncharacters(t *testing.T) {
	for _, nc := range []string{"\uffff", "\ufffe", "\ufdd0", "\ufdef", "\U0001fffe", "\U0010ffff",
		`\uffff`, `\ufdd0`, `\uFDEF`, `\ud83f\udfff`, `\udbff\udffe`} {
		for _, c := range []struct {
			decoder, body, field string
		}{
			{"create", `{"type":"x","context":{"s":"a` + nc + `"}}`, "context.s"},
			{"create", `{"type":"x","context":{"k` + nc + `":1}}`, "context"},
			{"complete", `{"result_type":"answer","result":{"k":["` + nc + `"]}}`, "result.k[0]"},
			{"progress", `{"message":"` + nc + `"}`, "message"},
			{"fail", `{"code":"E","reason":"` + nc + `"}`, "reason"},
			{"cancel", `{"reason":"` + nc + `"}`, "reason"},
			{"webhook", `{"url":"https://h.example/","description":"` + nc + `"}`, "description"},
		} {
			assertRefused(t, c.decoder, c.body, c.field)
		}
	}
	// the characters next to the noncharacters are fine
	for _, ok := range []string{"\ufdcf", "\ufdf0", "\ufffd", "\U0001fffd", "\U00020000", `\ufffd`, `\ufdcf`} {
		if _, err := DecodeProgress([]byte(`{"message":"` + ok + `"}`)); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
}

// TestNestingDepth: a stored member (context, result) may nest MaxJSONDepth
// arrays and objects, not one more; deeper answers 400 naming the member.
func TestNestingDepth(t *testing.T) {
	nest := func(n int, open, close string) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	for _, c := range []struct {
		decoder, body, field string
	}{
		{"create", `{"type":"x","context":{"a":` + nest(MaxJSONDepth-1, "[", "]") + `}}`, ""},
		{"create", `{"type":"x","context":{"a":` + nest(MaxJSONDepth, "[", "]") + `}}`, "context"},
		{"complete", `{"result_type":"answer","result":` + nest(MaxJSONDepth, `{"a":`, "}") + `}`, ""},
		{"complete", `{"result_type":"answer","result":` + nest(MaxJSONDepth+1, `{"a":`, "}") + `}`, "result"},
		{"complete", `{"result_type":"answer","result":{"a":` + nest(8000, "[", "]") + `}}`, "result"},
		{"webhook", `{"url":"https://h.example/","events":` + nest(MaxJSONDepth+1, "[", "]") + `}`, "events"},
	} {
		if c.field == "" {
			if err := decoders()[c.decoder]([]byte(c.body)); err != nil {
				t.Errorf("%s at the limit: %v", c.decoder, err)
			}
			continue
		}
		assertRefused(t, c.decoder, c.body, c.field)
	}
}

func decoders() map[string]func([]byte) error {
	return map[string]func([]byte) error{
		"create":   func(b []byte) error { _, err := DecodeCreate(b, refLimits); return err },
		"complete": func(b []byte) error { _, err := DecodeComplete(b, refLimits); return err },
		"progress": func(b []byte) error { _, err := DecodeProgress(b); return err },
		"fail":     func(b []byte) error { _, err := DecodeFail(b); return err },
		"cancel":   func(b []byte) error { _, err := DecodeCancel(b); return err },
		"webhook":  func(b []byte) error { _, err := DecodeWebhook(b); return err },
	}
}

func assertRefused(t *testing.T, decoder, body, field string) {
	t.Helper()
	err := decoders()[decoder]([]byte(body))
	e, ok := err.(*domain.Error)
	if !ok || e.Code != domain.ValidationFailed || len(e.Fields) == 0 || e.Fields[0].Field != field {
		t.Errorf("%s %.120q: %#v, want VALIDATION_FAILED naming %s", decoder, body, err, field)
	}
}
