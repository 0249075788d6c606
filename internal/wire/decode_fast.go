package wire

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// The fast paths below decode the common, well-formed bodies without encoding/json's
// reflection-driven Decoder, which would be the largest part of the server's CPU on
// create and complete (docs/performance-log.md, item 7). Each one answers only when it
// can prove that the slow path (decodeCreateSlow and friends) would accept the body
// and return the very same value; for anything else (an error, an escape, an unknown
// or duplicate member, a value it does not understand) it declines and the slow path
// gives the answer, so errors never change.

// field is the raw value of one known top-level member.
type field struct {
	raw   []byte // the value without surrounding whitespace; nil when absent
	space int    // insignificant whitespace bytes inside raw
}

// scanFields reads a body that must be one JSON object whose members all carry
// one of keys, each at most once, into fs (fs[i] for keys[i]). It reports false
// for anything else, including a key spelt with escapes or in another case:
// encoding/json would match such keys case-insensitively, and duplicates let
// the last one win, which only the slow path reproduces. The syntax is checked
// as strictly as the slow path's scanner does (see value), in the same pass.
func scanFields(body []byte, keys []string, fs []field) bool {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return skipSpace(body, i+1) == len(body)
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return false
		}
		j := i + 1
		for j < len(body) && body[j] != '"' && body[j] != '\\' {
			j++
		}
		if j >= len(body) || body[j] != '"' {
			return false
		}
		// A known key is plain ASCII, so a match is also a valid string.
		k := keyIndex(keys, body[i+1:j])
		if k < 0 || fs[k].raw != nil {
			return false
		}
		i = skipSpace(body, j+1)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = skipSpace(body, i+1)
		end, space, ok := value(body, i, 1)
		if !ok {
			return false
		}
		fs[k] = field{raw: body[i:end], space: space}
		i = skipSpace(body, end)
		if i >= len(body) {
			return false
		}
		switch body[i] {
		case '}':
			return skipSpace(body, i+1) == len(body)
		case ',':
			i = skipSpace(body, i+1)
		default:
			return false
		}
	}
}

func keyIndex(keys []string, key []byte) int {
	for i, k := range keys {
		if string(key) == k {
			return i
		}
	}
	return -1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isJSONSpace(b[i]) {
		i++
	}
	return i
}

// isJSONSpace is JSON's insignificant whitespace (not bytes.TrimSpace's set).
func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// maxFastMembers bounds the members of one object the fast path follows
// (it compares each name with those before it); larger objects go to the slow
// path, which keeps a map.
const maxFastMembers = 16

// maxFastDepth bounds the nesting the fast path follows (it recurses): a
// member's value may nest MaxJSONDepth deep, and anything deeper goes to the
// slow path, which refuses it.
const maxFastDepth = MaxJSONDepth + 1

// value checks the JSON value starting at b[i] with the grammar of
// encoding/json's scanner (json.Valid's), declining as well what is not I-JSON
// or what it cannot prove is (see strictStringEnd, finiteNumber, and the
// member names of objects), and returns its end and how many whitespace bytes
// outside strings it holds. depth counts the arrays and objects around it. What
// follows the value is the caller's to check.
func value(b []byte, i, depth int) (end, space int, ok bool) {
	if i >= len(b) {
		return 0, 0, false
	}
	switch c := b[i]; c {
	case '"':
		end, _, ok = strictStringEnd(b, i)
		return end, 0, ok
	case '{', '[':
		if depth >= maxFastDepth {
			return 0, 0, false
		}
		closing := byte(']')
		if c == '{' {
			closing = '}'
		}
		j := skipSpace(b, i+1)
		space, i = j-i-1, j
		if i < len(b) && b[i] == closing {
			return i + 1, space, true
		}
		// The member names of this object so far, as spans of b, so that a
		// duplicate (which the slow path refuses) is declined here.
		var names [maxFastMembers][2]int32
		members, seen := 0, uint64(0)
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return 0, 0, false
				}
				start := i
				var esc bool
				if i, esc, ok = strictStringEnd(b, i); !ok || esc || members == maxFastMembers {
					// An escaped name is compared unescaped by the slow path.
					return 0, 0, false
				}
				// A one-word filter spares most comparisons: names are
				// compared only when their (length, last byte) bit is taken.
				name := b[start+1 : i-1]
				bit := uint64(1) << ((uint(len(name))*7 + uint(b[i-2])) & 63)
				if seen&bit != 0 {
					for _, n := range names[:members] {
						if string(b[n[0]:n[1]]) == string(name) {
							return 0, 0, false
						}
					}
				}
				seen |= bit
				names[members] = [2]int32{int32(start + 1), int32(i - 1)}
				members++
				j = skipSpace(b, i)
				space, i = space+j-i, j
				if i >= len(b) || b[i] != ':' {
					return 0, 0, false
				}
				j = skipSpace(b, i+1)
				space, i = space+j-i-1, j
			}
			e, s, ok := value(b, i, depth+1)
			if !ok {
				return 0, 0, false
			}
			j = skipSpace(b, e)
			space, i = space+s+j-e, j
			if i >= len(b) {
				return 0, 0, false
			}
			switch b[i] {
			case closing:
				return i + 1, space, true
			case ',':
				j = skipSpace(b, i+1)
				space, i = space+j-i-1, j
			default:
				return 0, 0, false
			}
		}
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	}
	end, ok = numberEnd(b, i)
	return end, 0, ok && finiteNumber(b[i:end])
}

func literal(b []byte, i int, lit string) (end, space int, ok bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, 0, false
	}
	return i + len(lit), 0, true
}

// numberEnd checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at b[i].
func numberEnd(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return 0, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digitsEnd(b, i+1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digitsEnd(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digitsEnd(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digitsEnd(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// stringEnd checks the string literal opening at b[i] and returns the index
// after its closing quote: no control characters, only JSON's escapes.
func stringEnd(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		c := b[i]
		if c >= ' ' && c != '"' && c != '\\' {
			continue
		}
		switch c {
		case '"':
			return i + 1, true
		case '\\':
			i++
			if i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return 0, false
				}
				i += 4
			default:
				return 0, false
			}
		default: // a control character
			return 0, false
		}
	}
	return 0, false
}

// strictStringEnd is stringEnd for the fast path, which must also decline
// what is not I-JSON (ijson.go): invalid UTF-8, a noncharacter, and any surrogate escape
// (paired ones are rare; the slow path tells them from unpaired ones). esc
// reports an escape anywhere in the literal.
func strictStringEnd(b []byte, i int) (end int, esc, ok bool) {
	for i++; i < len(b); {
		c := b[i]
		if c >= ' ' && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1, esc, true
		case c == '\\':
			esc = true
			i++
			if i >= len(b) {
				return 0, false, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(b)-i <= 4 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return 0, false, false
				}
				if r := hex4(b[i+1 : i+5]); r >= 0xD800 && r <= 0xDFFF || isNoncharacter(r) {
					return 0, false, false
				}
				i += 5
			default:
				return 0, false, false
			}
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 || isNoncharacter(r) {
				return 0, false, false
			}
			i += size
		default: // a control character
			return 0, false, false
		}
	}
	return 0, false, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipString returns the index after the string literal opening at b[i],
// which is known to be valid.
func skipString(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// compactCopy returns a new, compacted copy of f's valid JSON value, as
// json.Compact would write it: the caller's body may be a reused buffer
// (fasthttp recycles request bodies), so the result must never alias it.
func compactCopy(f field) json.RawMessage {
	out := make([]byte, 0, len(f.raw)-f.space)
	if f.space == 0 {
		return append(out, f.raw...)
	}
	raw := f.raw
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '"':
			end := skipString(raw, i)
			out = append(out, raw[i:end]...)
			i = end
		case isJSONSpace(c):
			i++
		default:
			out = append(out, c)
			i++
		}
	}
	return out
}

func isNull(raw []byte) bool { return string(raw) == "null" }

// absent reports whether an optional member is missing or null, which the
// slow path treats alike.
func absent(f field) bool { return f.raw == nil || isNull(f.raw) }

// smallInt reads a JSON number that is a plain run of digits in [lo, hi], for
// 0 <= lo <= hi < 1e9. Anything else ("-0", 1.0, 1e2, a string) is the slow
// path's to judge.
func smallInt(raw []byte, lo, hi int) (int, bool) {
	if len(raw) == 0 || len(raw) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= lo && n <= hi
}

// typeName returns the unquoted value of a string literal that matches
// ^[a-z0-9][a-z0-9._-]{0,63}$ (what ValidType checks) with no escapes.
func typeName(raw []byte) ([]byte, bool) {
	if len(raw) < 3 || len(raw) > 66 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	if !isLowerAlnum(s[0]) {
		return nil, false
	}
	for _, c := range s[1:] {
		if !isLowerAlnum(c) && c != '.' && c != '_' && c != '-' {
			return nil, false
		}
	}
	return s, true
}

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// failureCode is typeName for ^[A-Z][A-Z0-9_]{0,63}$ (failureCodePattern).
func failureCode(raw []byte) ([]byte, bool) {
	if len(raw) < 3 || len(raw) > 66 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	if s[0] < 'A' || s[0] > 'Z' {
		return nil, false
	}
	for _, c := range s[1:] {
		if !('A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return nil, false
		}
	}
	return s, true
}

// plainString returns the unquoted value of a string literal of valid UTF-8 and
// at most maxRunes characters that json.Marshal writes back byte for byte: no
// escapes, none of <, >, & (Marshal escapes them for HTML), no U+2028 or
// U+2029. The slow path decodes such a literal to exactly these bytes.
func plainString(raw []byte, maxRunes int) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	ascii := true
	for _, c := range s {
		switch {
		case c == '\\' || c == '"' || c == '<' || c == '>' || c == '&' || c < ' ':
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if ascii {
		return s, len(s) <= maxRunes
	}
	n := 0
	for i := 0; i < len(s); n++ {
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return nil, false
		}
		i += size
	}
	return s, n <= maxRunes
}

// fastCreate is DecodeCreate for bodies decodeCreateSlow accepts.
func fastCreate(body []byte, lim domain.Limits) (domain.CreateInput, bool) {
	var fs [4]field
	if !scanFields(body, []string{"type", "context", "estimated_duration_seconds", "labels"}, fs[:]) {
		return domain.CreateInput{}, false
	}
	typ, ok := typeName(fs[0].raw)
	if !ok {
		return domain.CreateInput{}, false
	}
	var out domain.CreateInput
	if c := fs[1]; !absent(c) {
		if c.raw[0] != '{' || len(c.raw)-c.space > lim.ContextBytes {
			return domain.CreateInput{}, false
		}
		out.Context = compactCopy(c)
	}
	if e := fs[2]; !absent(e) {
		if out.EstimatedDurationSeconds, ok = smallInt(e.raw, 1, 86400); !ok {
			return domain.CreateInput{}, false
		}
	}
	if l := fs[3]; !absent(l) {
		if l.raw[0] != '{' {
			return domain.CreateInput{}, false
		}
		if out.Labels, ok = fastLabels(l.raw); !ok {
			return domain.CreateInput{}, false
		}
	}
	out.Type = string(typ)
	return out, true
}

// fastComplete is DecodeComplete for bodies decodeCompleteSlow accepts.
func fastComplete(body []byte, lim domain.Limits) (domain.CompleteInput, bool) {
	var fs [2]field
	if !scanFields(body, []string{"result_type", "result"}, fs[:]) {
		return domain.CompleteInput{}, false
	}
	res := fs[1]
	if absent(res) {
		return domain.CompleteInput{}, false
	}
	switch string(fs[0].raw) {
	case `"` + domain.ResultAnswer + `"`:
		if res.raw[0] != '{' || len(res.raw)-res.space > lim.ResultBytes {
			return domain.CompleteInput{}, false
		}
		return domain.CompleteInput{ResultType: domain.ResultAnswer, Result: compactCopy(res)}, true
	case `"` + domain.ResultLink + `"`:
		// The slow path hands the same raw value to decodeLink once the
		// envelope is valid, and decodeLink's answer depends on those bytes
		// alone. Its errors are left to the slow path, so that the order of
		// envelope and result errors stays its business.
		r, err := decodeLink(res.raw)
		if err != nil {
			return domain.CompleteInput{}, false
		}
		return domain.CompleteInput{ResultType: domain.ResultLink, Result: r}, true
	case `"` + domain.ResultConfirmation + `"`:
		r, err := decodeConfirmation(res.raw)
		if err != nil {
			return domain.CompleteInput{}, false
		}
		return domain.CompleteInput{ResultType: domain.ResultConfirmation, Result: r}, true
	}
	return domain.CompleteInput{}, false
}

// fastProgress is DecodeProgress for bodies decodeProgressSlow accepts.
func fastProgress(body []byte) (domain.ProgressInput, bool) {
	var fs [2]field
	if !scanFields(body, []string{"percent", "message"}, fs[:]) {
		return domain.ProgressInput{}, false
	}
	percent, message := fs[0], fs[1]
	if absent(percent) && absent(message) {
		return domain.ProgressInput{}, true
	}
	// Built by hand as json.Marshal writes the slow path's struct: members in
	// field order, each left out when empty (omitempty).
	b := make([]byte, 0, len(`{"percent":,"message":}`)+len(percent.raw)+len(message.raw))
	b = append(b, '{')
	if !absent(percent) {
		if _, ok := smallInt(percent.raw, 0, 100); !ok {
			return domain.ProgressInput{}, false
		}
		b = append(b, `"percent":`...)
		b = append(b, percent.raw...) // digits only, so already canonical
	}
	if !absent(message) {
		s, ok := plainString(message.raw, 256)
		if !ok {
			return domain.ProgressInput{}, false
		}
		if len(s) > 0 {
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = append(b, `"message":`...)
			b = append(b, message.raw...)
		}
	}
	return domain.ProgressInput{Progress: append(b, '}')}, true
}

// fastFail is DecodeFail for bodies decodeFailSlow accepts.
func fastFail(body []byte) (domain.FailInput, bool) {
	var fs [2]field
	if !scanFields(body, []string{"code", "reason"}, fs[:]) {
		return domain.FailInput{}, false
	}
	if _, ok := failureCode(fs[0].raw); !ok {
		return domain.FailInput{}, false
	}
	// FailureJSON's encoding, built by hand: the reason is left out when empty.
	code, reason := fs[0].raw, fs[1]
	b := make([]byte, 0, len(`{"code":,"reason":}`)+len(code)+len(reason.raw))
	b = append(b, `{"code":`...)
	b = append(b, code...)
	if !absent(reason) {
		s, ok := plainString(reason.raw, 1024)
		if !ok {
			return domain.FailInput{}, false
		}
		if len(s) > 0 {
			b = append(b, `,"reason":`...)
			b = append(b, reason.raw...)
		}
	}
	return domain.FailInput{Failure: append(b, '}')}, true
}
