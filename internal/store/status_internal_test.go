package store

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	lua "github.com/asyncstatus/asyncstatus/scripts/lua"
)

// TestStatusLetters pins the one table of status letters: every status has
// its own letter both ways; the scripts see exactly those letters through
// their constants, on every backend; and no script spells a letter itself,
// so a change to statusLetters reaches Go and Lua alike.
func TestStatusLetters(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range domain.Statuses {
		l := statusCode[s]
		if len(l) != 1 || seen[l] || codeStatus[l] != s {
			t.Fatalf("status %s: letter %q (seen %v), back to %q", s, l, seen[l], codeStatus[l])
		}
		seen[l] = true
	}
	if len(statusCode) != len(domain.Statuses) || len(codeStatus) != len(domain.Statuses) {
		t.Fatalf("%d letters, %d statuses back, %d statuses", len(statusCode), len(codeStatus), len(domain.Statuses))
	}

	body := "local all, live = S_ALL, S_LIVE\n" +
		"return {S_QUEUED, S_PROCESSING, S_SUCCEEDED, S_FAILED, S_CANCELLED, S_EXPIRED, table.concat(all, ''), table.concat(live, '')}"
	src, err := assemble("", body, statusConstants())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(src, "S_QUEUED") || strings.Contains(src, "local S_") {
		t.Fatalf("status letters not written in:\n%s", src)
	}
	var want []any
	var all, live string
	for _, s := range domain.Statuses {
		want = append(want, statusCode[s])
		all += statusCode[s]
		if !s.Terminal() {
			live += statusCode[s]
		}
	}
	want = append(want, all, live)
	evalOnEveryBackend(t, src, want)

	// A script compares or builds with a status only through S_*: a letter
	// literal next to a comparison, a concatenation or in a list is a second
	// spelling of the table.
	spelled := regexp.MustCompile(`(==|~=|\.\.|\{)\s*'[` + statusLetters + `]'|'[` + statusLetters + `]'\s*(==|~=|\.\.)`)
	names, err := fs.Glob(lua.FS, "*.lua")
	if err != nil || len(names) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, n := range names {
		b, err := fs.ReadFile(lua.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "--")
			if m := spelled.FindString(code); m != "" {
				t.Errorf("%s:%d spells a status letter (%s): use the S_* constants\n%s", n, i+1, m, line)
			}
		}
	}
}
