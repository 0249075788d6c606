package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Bodies must be I-JSON (RFC 7493), so that everything the service stores and
// echoes (answers, list pages, webhook bodies) is valid JSON and valid UTF-8
// for every parser: encoding/json alone accepts invalid UTF-8 (and json.RawMessage
// keeps it raw), lets the last of two equal member names win, matches member
// names case-insensitively and keeps 1e309 as text.
//
// checkIJSON walks a body that encoding/json is about to decode and reports the
// first I-JSON violation: a string (value or member name) that is not valid
// UTF-8 or holds an unpaired surrogate escape, a duplicate member name (after
// unescaping) in any object, or a number beyond a finite IEEE 754 double. It
// also returns the top-level member names, unescaped, for exact matching.
// Malformed JSON is not its business: on a syntax error it stops and reports
// nothing, and the decoder's own error is the answer.
type ijsonChecker struct {
	b    []byte
	path []string // member names (and [i]) from the top to where it is
	err  *domain.FieldError
	top  []string // top-level member names
	deep bool     // err is the nesting limit, not an I-JSON violation
}

// MaxJSONDepth bounds how deeply a member of a body (context, result, a
// link, ...) nests arrays and objects; it also bounds the checker's
// recursion. The service stores such members and
// echoes them on every poll, list page and webhook; common parsers fail far
// below encoding/json's 10,000 (Python's json at about 1,000, some at 512),
// and no status document needs more than a handful of levels.
const MaxJSONDepth = 64

// checkIJSON returns the violation found in body (nil: none, or malformed
// JSON), the top-level member names when body is an object, and whether the
// violation is nesting deeper than MaxJSONDepth.
func checkIJSON(body []byte) (*domain.FieldError, []string, bool) {
	c := ijsonChecker{b: body}
	i := skipSpace(body, 0)
	c.value(i, 0)
	return c.err, c.top, c.deep
}

// field names where the checker stands: the dotted member path, "body" at the top.
func (c *ijsonChecker) field() string {
	if len(c.path) == 0 {
		return "body"
	}
	var s strings.Builder
	for i, p := range c.path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			s.WriteByte('.')
		}
		s.WriteString(p)
	}
	return s.String()
}

func (c *ijsonChecker) fail(msg string) {
	c.err = &domain.FieldError{Field: c.field(), Message: msg}
}

// value checks the value at c.b[i] and returns the index after it, or -1 when
// it stops (a violation, recorded in c.err, or a syntax error).
func (c *ijsonChecker) value(i, depth int) int {
	b := c.b
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _, ok := c.str(i)
		if !ok {
			return -1
		}
		return end
	case '{', '[':
		if depth > MaxJSONDepth {
			// named by the top-level member: the full path is 64 levels long
			c.err = &domain.FieldError{Field: c.path[0], Message: fmt.Sprintf("must not nest arrays and objects more than %d deep", MaxJSONDepth)}
			c.deep = true
			return -1
		}
		if b[i] == '{' {
			return c.object(i, depth)
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1
		}
		for n := 0; ; n++ {
			c.path = append(c.path, "["+strconv.Itoa(n)+"]")
			i = c.value(i, depth+1)
			c.path = c.path[:len(c.path)-1]
			if i < 0 {
				return -1
			}
			var done bool
			if i, done = c.next(i, ']'); done {
				return i
			}
		}
	case 't', 'f', 'n':
		for i < len(b) && b[i] >= 'a' && b[i] <= 'z' {
			i++
		}
		return i
	}
	end, ok := numberEnd(b, i)
	if !ok {
		return -1
	}
	if !finiteNumber(b[i:end]) {
		c.fail("must be a finite number (at most about 1.8e308 in magnitude)")
		return -1
	}
	return end
}

func (c *ijsonChecker) object(i, depth int) int {
	b := c.b
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	var names []string
	var seen map[string]struct{} // once names grows past a handful
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		end, name, ok := c.str(i)
		if !ok {
			return -1
		}
		dup := false
		if seen != nil {
			_, dup = seen[name]
			seen[name] = struct{}{}
		} else {
			for _, n := range names {
				dup = dup || n == name
			}
			if names = append(names, name); len(names) > 16 {
				seen = make(map[string]struct{}, 2*len(names))
				for _, n := range names {
					seen[n] = struct{}{}
				}
			}
		}
		if depth == 0 {
			c.top = append(c.top, name)
		}
		c.path = append(c.path, displayName(name))
		if dup {
			c.fail("duplicate member name")
			return -1
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		i = c.value(skipSpace(b, i+1), depth+1)
		c.path = c.path[:len(c.path)-1]
		if i < 0 {
			return -1
		}
		var done bool
		if i, done = c.next(i, '}'); done {
			return i
		}
	}
}

// next reads what follows a member or an element at c.b[i]: the closing
// byte (done, and the index after it) or a comma (the index of what follows
// it); -1 and done on anything else.
func (c *ijsonChecker) next(i int, closing byte) (int, bool) {
	b := c.b
	i = skipSpace(b, i)
	switch {
	case i >= len(b):
		return -1, true
	case b[i] == closing:
		return i + 1, true
	case b[i] == ',':
		return skipSpace(b, i+1), false
	}
	return -1, true
}

// displayName is a member name as a field path may show it: the answer must
// stay valid UTF-8 and short, whatever the name.
func displayName(name string) string {
	if !utf8.ValidString(name) {
		return "(a member name that is not UTF-8)"
	}
	if len(name) > 64 {
		return name[:60] + "..."
	}
	return name
}

// str checks the string literal opening at c.b[i]: valid UTF-8, no unpaired
// surrogate escape. It returns the index after it and its unescaped value
// (for member names; values are decoded only when they hold an escape).
func (c *ijsonChecker) str(i int) (end int, val string, ok bool) {
	b := c.b
	end, ok = stringEnd(b, i)
	if !ok {
		return 0, "", false // a syntax error
	}
	raw := b[i+1 : end-1]
	if !utf8.Valid(raw) {
		c.fail("must be valid UTF-8")
		return 0, "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		if hasNoncharacter(raw) {
			c.fail(nonchararacterMsg)
			return 0, "", false
		}
		return end, string(raw), true
	}
	if !surrogatesPaired(raw) {
		c.fail("must be valid UTF-8 (an escaped surrogate must be one of a pair)")
		return 0, "", false
	}
	if err := json.Unmarshal(b[i:end], &val); err != nil {
		return 0, "", false
	}
	if hasNoncharacter([]byte(val)) {
		c.fail(nonchararacterMsg)
		return 0, "", false
	}
	return end, val, true
}

const nonchararacterMsg = "must not contain a Unicode noncharacter (U+FDD0..U+FDEF, or U+FFFE or U+FFFF of any plane)"

// isNoncharacter reports whether r is one of Unicode's 66 noncharacters,
// which I-JSON (RFC 7493 §2.1) forbids in strings.
func isNoncharacter(r rune) bool {
	return r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE && r <= utf8.MaxRune
}

// hasNoncharacter reports whether valid UTF-8 s holds a noncharacter. Each
// one is encoded in three or four bytes led by 0xEF or 0xF0..0xF4, so other
// bytes are skipped without decoding.
func hasNoncharacter(s []byte) bool {
	for i := 0; i < len(s); {
		if s[i] < 0xEF {
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if isNoncharacter(r) {
			return true
		}
		i += size
	}
	return false
}

// surrogatesPaired reports whether every \uD800-\uDFFF escape in the inside of
// a valid string literal is a high surrogate directly followed by a low one.
func surrogatesPaired(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if raw[i] != 'u' {
			continue
		}
		r := hex4(raw[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return false
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return false
			}
			if lo := hex4(raw[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 6
		}
	}
	return true
}

// hex4 reads four hex digits (known valid).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// finiteNumber reports whether a valid JSON number is within a finite double.
// Only an exponent or a long run of digits can overflow, so only those are
// parsed; underflow (1e-400) rounds to zero, which is a finite double.
func finiteNumber(n []byte) bool {
	if len(n) <= 300 {
		exp := false
		for _, c := range n {
			exp = exp || c == 'e' || c == 'E'
		}
		if !exp {
			return true
		}
	}
	_, err := strconv.ParseFloat(string(n), 64)
	return err == nil
}
