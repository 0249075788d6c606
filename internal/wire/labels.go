package wire

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// decodeLabels validates a create body's labels member (present, not null),
// adding one error per bad field: "labels" for the member as a whole,
// "labels.<name>" for one label. The body already passed the I-JSON check, so
// member names are distinct.
func decodeLabels(raw json.RawMessage, v *validator) domain.Labels {
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &m) != nil {
		v.add("labels", "must be a JSON object of at most %d labels", domain.MaxLabels)
		return ""
	}
	if len(m) > domain.MaxLabels {
		v.add("labels", "must have at most %d members (has %d)", domain.MaxLabels, len(m))
		return ""
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	ls := make([]domain.Label, 0, len(m))
	bad := false
	for _, n := range names {
		field := "labels." + displayName(n)
		if !domain.ValidLabelName(n) {
			v.add(field, "the label name must match %s", domain.LabelNamePattern)
			bad = true
			continue
		}
		var val string
		if json.Unmarshal(m[n], &val) != nil || !domain.ValidLabelValue(val) {
			v.add(field, "must be a string matching %s", domain.LabelValuePattern)
			bad = true
			continue
		}
		ls = append(ls, domain.Label{Name: n, Value: val})
	}
	if bad {
		return ""
	}
	return domain.MakeLabels(ls)
}

// fastLabels is decodeLabels for the objects it accepts without an error: at
// most MaxLabels members, each a plain (escape-free) valid name with a plain
// valid string value. raw is the member's value as scanFields found it (its
// syntax already checked, duplicates not). Anything else declines, and the
// slow path answers.
func fastLabels(raw []byte) (domain.Labels, bool) {
	var ls [domain.MaxLabels]domain.Label
	n := 0
	i := skipSpace(raw, 1)
	if i < len(raw) && raw[i] == '}' {
		return "", true
	}
	for {
		name, end, ok := plainQuoted(raw, i)
		if !ok || n == domain.MaxLabels || !domain.ValidLabelName(name) {
			return "", false
		}
		for _, l := range ls[:n] {
			if l.Name == name {
				return "", false
			}
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return "", false
		}
		val, end, ok := plainQuoted(raw, skipSpace(raw, i+1))
		if !ok || !domain.ValidLabelValue(val) {
			return "", false
		}
		ls[n] = domain.Label{Name: name, Value: val}
		n++
		i = skipSpace(raw, end)
		if i >= len(raw) {
			return "", false
		}
		switch raw[i] {
		case '}':
			return domain.MakeLabels(ls[:n]), skipSpace(raw, i+1) == len(raw)
		case ',':
			i = skipSpace(raw, i+1)
		default:
			return "", false
		}
	}
}

// plainQuoted reads the string literal at b[i] when it holds no escape and
// only printable ASCII (all a valid label name or value can hold).
func plainQuoted(b []byte, i int) (s string, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return "", 0, false
		}
	}
	return "", 0, false
}
