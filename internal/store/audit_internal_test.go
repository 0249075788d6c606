package store

import "testing"

func TestStreamIDOrder(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{
		{"", "0-0", true}, {"0-0", "", false}, {"5-1", "5-2", true}, {"5-2", "5-1", false},
		{"9-9", "10-0", true}, {"10-0", "9-9", false}, {"7-3", "7-3", false},
	} {
		if got := streamIDLess(c.a, c.b); got != c.less {
			t.Errorf("streamIDLess(%q, %q) = %v", c.a, c.b, got)
		}
	}
	if got := nextStreamID("1764410400000-9"); got != "1764410400000-10" {
		t.Errorf("nextStreamID = %s", got)
	}
}
