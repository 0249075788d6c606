package store

import (
	"strings"
	"testing"
)

// The create and transition scripts name the change log and the change
// channel from the meta key (lib.lua, changelog_add).
func TestChangeLogNamedFromMeta(t *testing.T) {
	k := keys{prefix: "as"}
	for _, tag := range []string{"{acme}", "{acme:17}"} {
		base := strings.TrimSuffix(k.meta(tag), "m")
		if base+"cl" != k.changeLog(tag) || base+"w" != k.changes(tag) {
			t.Fatalf("tag %s: meta %s, log %s, channel %s", tag, k.meta(tag), k.changeLog(tag), k.changes(tag))
		}
	}
}

func TestLogPositions(t *testing.T) {
	for _, s := range []string{"1-0", "1764410400000-3.1764410400001-0"} {
		n := strings.Count(s, ".") + 1
		p, ok := parseLogPosition(s, n)
		if !ok || p.String() != s {
			t.Fatalf("%q: %v %v", s, p, ok)
		}
	}
	for _, s := range []string{"", "1", "1-", "-1", "01-0", "1-01", "1-0.", "x-0", "1-0 ", "18446744073709551616-0", "1-0.2-0"} {
		if p, ok := parseLogPosition(s, 1); ok {
			t.Fatalf("%q parsed as %v", s, p)
		}
	}
	if (streamID{5, ^uint64(0)}).next() != (streamID{6, 0}) || (streamID{5, 1}).next() != (streamID{5, 2}) {
		t.Fatal("next")
	}
}
