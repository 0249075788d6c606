package domain

import (
	"regexp"
	"strings"
	"testing"
)

// TestLabelPatterns holds the hand-written checks to the documented patterns.
func TestLabelPatterns(t *testing.T) {
	name, value := regexp.MustCompile(LabelNamePattern), regexp.MustCompile(LabelValuePattern)
	cases := []string{"", "a", "A", "0", "a0", "a-", "-a", "a.b_c-d", "a:b", "a/b", "a b", "é", "a=b", "a,b",
		"Ab", "aB", "a1", "1a", "a:", ":a", "a/b/c", strings.Repeat("a", 63), strings.Repeat("a", 64), "a\x00"}
	for _, c := range cases {
		if got, want := ValidLabelName(c), name.MatchString(c); got != want {
			t.Errorf("name %q: %v, pattern %v", c, got, want)
		}
		if got, want := ValidLabelValue(c), value.MatchString(c); got != want {
			t.Errorf("value %q: %v, pattern %v", c, got, want)
		}
	}
}

func TestMakeLabelsIsCanonical(t *testing.T) {
	l := MakeLabels([]Label{{"team", "b"}, {"env", "p"}})
	if l != "env=p,team=b" {
		t.Fatalf("%q", l)
	}
	if v, ok := l.Get("team"); !ok || v != "b" {
		t.Errorf("Get: %q %v", v, ok)
	}
	if _, ok := l.Get("x"); ok {
		t.Error("Get of a missing label")
	}
	if MakeLabels(nil) != "" || len(Labels("").Pairs()) != 0 {
		t.Error("no labels")
	}
}
