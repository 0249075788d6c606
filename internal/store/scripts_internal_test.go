package store

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
	lua "github.com/asyncstatus/asyncstatus/scripts/lua"
)

// TestLibFor pins how scripts get their helpers: what a script calls, and what
// those helpers call in turn, is prepended; nothing else, and names that only
// comments mention do not count. (Every script's own tests show that nothing
// it needs is missing: a missing helper fails its first call.)
func TestLibFor(t *testing.T) {
	lib := "-- header\nlocal rcall = redis.call\n\n" +
		"-- a: uses SEP\nlocal function a() return SEP end\n\n" +
		"-- SEP: the separator\nlocal SEP = '|'\n\n" +
		"local X = 1\nlocal function uses_x() return X end\n\n" +
		"local function unused() return rcall('PING') end"
	for _, tc := range []struct {
		body string
		want []string // the definitions prepended, in lib's order
	}{
		{"return rcall('GET', KEYS[1])", []string{"local rcall"}},
		{"return a()", []string{"local function a", "local SEP"}},
		{"-- calls unused() and a() in a comment only\nreturn 1", nil},
		{"return uses_x()", []string{"local X", "local function uses_x"}}, // one paragraph, whole
		{"return rcall('GET', KEYS[1]) .. a() .. X", []string{"local rcall", "local function a", "local SEP", "local X", "local function uses_x"}},
	} {
		got := libDefinition.FindAllString(libFor(lib, tc.body), -1)
		if strings.Join(got, ";") != strings.Join(tc.want, ";") {
			t.Errorf("libFor(%q) defines %q, want %q", tc.body, got, tc.want)
		}
	}
}

// TestScriptsCarryOnlyTheirHelpers checks the real scripts: the poll path, the
// hottest, carries no webhook or record-splitting helper; transitions carry both.
func TestScriptsCarryOnlyTheirHelpers(t *testing.T) {
	lib, err := fs.ReadFile(lua.FS, "lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		script        string
		with, without []string
	}{
		{"poll.lua", []string{"rec_head", "gone", "terminal", "per_type", "fmt_ms"}, []string{"emit_webhooks", "rec_split", "rec_join", "SPLIT"}},
		{"transition.lua", []string{"rec_split", "rec_join", "SEP", "emit_webhooks", "gone", "terminal"}, []string{"rec_head"}},
		{"create.lua", []string{"emit_webhooks"}, []string{"rec_split", "rec_head", "per_type"}},
	} {
		body, err := fs.ReadFile(lua.FS, tc.script)
		if err != nil {
			t.Fatal(err)
		}
		defined := map[string]bool{}
		for _, m := range libDefinition.FindAllStringSubmatch(libFor(string(lib), string(body)), -1) {
			defined[m[1]] = true
		}
		for _, n := range tc.with {
			if !defined[n] {
				t.Errorf("%s lacks %s", tc.script, n)
			}
		}
		for _, n := range tc.without {
			if defined[n] {
				t.Errorf("%s carries %s, which it does not use", tc.script, n)
			}
		}
	}
}

// TestLuaConstants reads constants back through each backend's Lua: numbers
// as numbers, strings byte for byte, however they would end a long string.
func TestLuaConstants(t *testing.T) {
	cs := []luaConst{
		{"N", int64(86400000)}, {"F", 0.2}, {"S", ";a.b=1,2;c-d=5;"}, {"E", ""},
		{"B", "x]]y]=]z"}, {"NL", "\nlead"},
	}
	src := luaConstants(cs) + "return {tostring(N + 1), tostring(F * 10), S, E, B, NL, type(N), type(S)}"
	want := []any{"86400001", "2", ";a.b=1,2;c-d=5;", "", "x]]y]=]z", "\nlead", "number", "string"}
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			got, err := b.Client(t).Eval(context.Background(), src, []string{"{t}k"}).Slice()
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}
