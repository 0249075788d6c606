package domain

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
)

// Label rules (docs/reference.md §16): at most MaxLabels labels, fixed at create.
const (
	MaxLabels = 8
	// MaxSelectorTerms bounds a label_selector's name=value terms.
	MaxSelectorTerms = 4
	// LabelNamePattern and LabelValuePattern are what a label's name and value
	// must match; errors quote them. ValidLabelName and ValidLabelValue check
	// them by hand (no regexp on the create path); TestLabelPatterns holds the
	// two to the same answers.
	LabelNamePattern  = `^[a-z][a-z0-9_.-]{0,62}$`
	LabelValuePattern = `^[A-Za-z0-9]([A-Za-z0-9._:/-]{0,61}[A-Za-z0-9])?$`
)

// Labels are a request's labels in their one canonical spelling: the pairs
// "name=value" sorted by name and joined by ",", "" for none. Neither a name nor
// a value can hold "=", "," or a control byte, so the spelling is unambiguous
// and is stored as is (the record, the Idempotency-Key fingerprint, the label
// index names) without any JSON in Redis.
type Labels string

// Label is one name=value pair.
type Label struct{ Name, Value string }

// ValidLabelName reports whether n matches LabelNamePattern.
func ValidLabelName(n string) bool {
	if len(n) == 0 || len(n) > 63 || n[0] < 'a' || n[0] > 'z' {
		return false
	}
	for i := 1; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// ValidLabelValue reports whether v matches LabelValuePattern.
func ValidLabelValue(v string) bool {
	if len(v) == 0 || len(v) > 63 || !alnum(v[0]) || !alnum(v[len(v)-1]) {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		c := v[i]
		if !(alnum(c) || c == '.' || c == '_' || c == ':' || c == '/' || c == '-') {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// MakeLabels spells valid, distinct pairs canonically (it sorts ls in place).
func MakeLabels(ls []Label) Labels {
	if len(ls) == 0 {
		return ""
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.Name)
		b.WriteByte('=')
		b.WriteString(l.Value)
	}
	return Labels(b.String())
}

// Pairs lists the labels, sorted by name.
func (l Labels) Pairs() []Label {
	if l == "" {
		return nil
	}
	out := make([]Label, 0, strings.Count(string(l), ",")+1)
	for p := range strings.SplitSeq(string(l), ",") {
		n, v, _ := strings.Cut(p, "=")
		out = append(out, Label{n, v})
	}
	return out
}

// Get returns the value of label name.
func (l Labels) Get(name string) (string, bool) {
	for _, p := range l.Pairs() {
		if p.Name == name {
			return p.Value, true
		}
	}
	return "", false
}

// AppendJSON appends the labels as a JSON object, names sorted (what
// encoding/json makes of a map). Names and values need no escaping.
func (l Labels) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	for i, p := range l.Pairs() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, p.Name...)
		b = append(b, `":"`...)
		b = append(b, p.Value...)
		b = append(b, '"')
	}
	return append(b, '}')
}

// MarshalJSON writes the labels as a JSON object.
func (l Labels) MarshalJSON() ([]byte, error) { return l.AppendJSON(nil), nil }

// UnmarshalJSON reads a JSON object of valid labels (clients and tests; the
// API's bodies are decoded by internal/wire, which names each bad field).
func (l *Labels) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if len(m) > MaxLabels {
		return errors.New("labels: more than 8")
	}
	ls := make([]Label, 0, len(m))
	for n, v := range m {
		if !ValidLabelName(n) || !ValidLabelValue(v) {
			return errors.New("labels: invalid label " + n)
		}
		ls = append(ls, Label{n, v})
	}
	*l = MakeLabels(ls)
	return nil
}
