package wire

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// AppendRequest appends r's JSON representation to b: byte for byte what
// encoding/json's Marshal makes of it (HTML-escaping included), without
// reflection, and without re-validating the JSON members (progress, context,
// result, failure, cancellation).
//
// Those members are copied verbatim when encoding/json would leave them
// unchanged: when they hold no whitespace outside strings and none of the bytes
// that it escapes (<, >, & and U+2028, U+2029). Otherwise they go through
// encoding/json. The verbatim copy trusts them to be valid JSON, as the store
// keeps them (every one is validated when it is written); encoding/json would
// refuse invalid ones instead. TestAppendRequest proves the equality.
func AppendRequest(b []byte, r *domain.Request) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, r.Type)
	b = append(b, `,"status":`...)
	b = appendString(b, string(r.Status))
	b = append(b, `,"done":`...)
	b = strconv.AppendBool(b, r.Done)
	if b, err = appendRaw(b, `,"progress":`, r.Progress); err != nil {
		return nil, err
	}
	if b, err = appendRaw(b, `,"context":`, r.Context); err != nil {
		return nil, err
	}
	if r.Labels != "" {
		b = append(b, `,"labels":`...)
		b = r.Labels.AppendJSON(b)
	}
	if r.ResultType != "" {
		b = append(b, `,"result_type":`...)
		b = appendString(b, r.ResultType)
	}
	if b, err = appendRaw(b, `,"result":`, r.Result); err != nil {
		return nil, err
	}
	if b, err = appendRaw(b, `,"failure":`, r.Failure); err != nil {
		return nil, err
	}
	b = appendStamps(b, r)
	if b, err = appendRaw(b, `,"cancellation":`, r.Cancellation); err != nil {
		return nil, err
	}
	if r.PollToken != "" {
		b = append(b, `,"poll_token":`...)
		b = appendString(b, r.PollToken)
	}
	return append(b, '}'), nil
}

// appendTime writes a Time as its MarshalJSON does. TimeLayout by hand,
// because time.AppendFormat re-parses the layout on every call, three times per
// answer (docs/performance.md, "Why the hot path looks as it does").
func appendTime(b []byte, t domain.Time) []byte {
	u := t.UTC()
	y, mo, d := u.Date()
	if y < 0 || y > 9999 { // AppendFormat's own rendering of such years
		b = append(b, '"')
		b = u.AppendFormat(b, domain.TimeLayout)
		return append(b, '"')
	}
	h, mi, sec := u.Clock()
	ms := u.Nanosecond() / 1e6
	return append(b, '"',
		byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+mo/10), byte('0'+mo%10), '-', byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.',
		byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z', '"')
}

func appendTimePtr(b []byte, t *domain.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return appendTime(b, *t)
}

// appendRaw writes member name and raw unless raw is empty (omitempty).
func appendRaw(b []byte, name string, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return b, nil
	}
	b = append(b, name...)
	if verbatim(raw) {
		return append(b, raw...), nil
	}
	// what encoding/json does with a RawMessage member: compact, HTML-escape
	enc, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// verbatim reports whether encoding/json would write the valid JSON text raw
// unchanged: no whitespace outside strings, nothing it escapes (<, >, &, and
// U+2028 and U+2029, whose UTF-8 starts with 0xE2; any 0xE2 sends raw the slow
// way, which is exact too).
func verbatim(raw []byte) bool {
	in := false
	for i := 0; i < len(raw); i++ {
		// Most bytes are none of the cases below: one table load skips them,
		// cheaper than the switch on every byte.
		if !verbatimSpecial[raw[i]] {
			continue
		}
		switch c := raw[i]; c {
		case '<', '>', '&', 0xE2:
			return false
		case ' ', '\t', '\n', '\r':
			if !in {
				return false
			}
		case '"':
			in = !in
		case '\\':
			if in {
				i++ // the escaped byte: never one of the above that matters
				if i < len(raw) && (raw[i] == '<' || raw[i] == '>' || raw[i] == '&') {
					return false // invalid escape: let encoding/json refuse it
				}
			}
		}
	}
	return !in
}

// verbatimSpecial marks the bytes verbatim's switch looks at. Read-only.
var verbatimSpecial = [256]bool{'<': true, '>': true, '&': true, 0xE2: true, ' ': true, '\t': true, '\n': true, '\r': true,
	'"': true, '\\': true}

// mustEscape marks the ASCII bytes appendString escapes: control bytes, the
// quote, the backslash and <, >, &. Read-only.
var mustEscape = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string exactly as encoding/json does with
// HTML escaping on (its default): <, >, & and control bytes as \u00XX (except
// \b \f \n \r \t), invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !mustEscape[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendStamps appends the members every view of a request shares, from
// created_by to version, in the representation's order.
func appendStamps(b []byte, r *domain.Request) []byte {
	b = append(b, `,"created_by":`...)
	b = appendString(b, r.CreatedBy)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, r.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, r.UpdatedAt)
	b = append(b, `,"completed_at":`...)
	b = appendTimePtr(b, r.CompletedAt)
	b = append(b, `,"expires_at":`...)
	b = appendTimePtr(b, r.ExpiresAt)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, r.Version, 10)
	return b
}
