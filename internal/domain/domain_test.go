package domain

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestScopes(t *testing.T) {
	s, err := ParseScopes("write,read")
	if err != nil || !s.Has(ScopeRead|ScopeWrite) || s.Has(ScopeAdmin) || s.String() != "read,write" {
		t.Fatalf("%v %v", s, err)
	}
	for _, bad := range []string{"", "read,", "root", "read,,write"} {
		if _, err := ParseScopes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestTimeFormat(t *testing.T) {
	b, _ := json.Marshal(TimeMs(time.Date(2026, 11, 29, 10, 0, 4, 512_000_000, time.FixedZone("x", 3600)).UnixMilli()))
	if string(b) != `"2026-11-29T09:00:04.512Z"` {
		t.Fatalf("%s", b)
	}
	r := Request{Status: StatusQueued}
	out, _ := json.Marshal(r)
	if !strings.Contains(string(out), `"completed_at":null`) || strings.Contains(string(out), "progress") {
		t.Fatalf("optional members: %s", out)
	}
	for _, s := range Statuses {
		if s.Terminal() != (s != StatusQueued && s != StatusProcessing) || !s.Valid() {
			t.Fatalf("%s", s)
		}
	}
}
