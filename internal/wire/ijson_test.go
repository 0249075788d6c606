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
