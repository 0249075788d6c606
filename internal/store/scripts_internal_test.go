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

// TestLibFor pins how scripts get their helpers: what a script names in its
// "--- @include" lines, and what those helpers include in turn, is prepended;
// nothing else, in lib's order.
func TestLibFor(t *testing.T) {
	lib := "-- header\nlocal rcall = redis.call\n\n" +
		"-- SEP: the separator\nlocal SEP = '|'\n\n" +
		"-- a: uses SEP\n--- @include \"SEP\"\nlocal function a() return SEP end\n\n" +
		"local X = 1\nlocal function uses_x() return X end\n\n" +
		"--- @include \"rcall\"\nlocal function unused() return rcall('PING') end"
	inc := func(names ...string) string {
		var b strings.Builder
		for _, n := range names {
			b.WriteString("--- @include \"" + n + "\"\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		body string
		want []string // the definitions prepended, in lib's order
	}{
		{inc("rcall") + "return rcall('GET', KEYS[1])", []string{"local rcall"}},
		{inc("a") + "return a()", []string{"local SEP", "local function a"}},
		{"-- calls unused() and a() in a comment only\nreturn 1", nil},
		{inc("uses_x") + "return uses_x()", []string{"local X", "local function uses_x"}}, // one paragraph, whole
		{inc("X") + "return X", []string{"local X", "local function uses_x"}},
		{inc("a", "X", "rcall") + "return rcall('GET', KEYS[1]) .. a() .. X", []string{"local rcall", "local SEP", "local function a", "local X", "local function uses_x"}},
	} {
		head, err := libFor(lib, tc.body)
		if err != nil {
			t.Errorf("libFor(%q): %v", tc.body, err)
			continue
		}
		got := libDefinition.FindAllString(head, -1)
		if strings.Join(got, ";") != strings.Join(tc.want, ";") {
			t.Errorf("libFor(%q) defines %q, want %q", tc.body, got, tc.want)
		}
	}
}

// TestLibForRefuses: a script that uses a helper without including it does
// not load (rather than failing at its first call), nor does one that
// includes what it does not use, names no helper, or a lib helper that
// includes one defined after it.
func TestLibForRefuses(t *testing.T) {
	lib := "local rcall = redis.call\n\n" +
		"local SEP = '|'\n\n" +
		"--- @include \"SEP\"\nlocal function a() return SEP end\n\n" +
		"local function b() return rcall('PING') end"
	for _, tc := range []struct{ body, want string }{
		{"return rcall('GET', KEYS[1])", "without --- @include \"rcall\""},
		{"--- @include \"b\"\nreturn b()", "without --- @include \"rcall\""}, // b's own include is missing
		{"--- @include \"rcall\"\nreturn 1", "\"rcall\": not used"},
		{"--- @include \"nope\"\nreturn nope()", "no such helper"},
	} {
		_, err := libFor(lib, tc.body)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("libFor(%q) = %v, want an error with %q", tc.body, err, tc.want)
		}
	}
	late := "--- @include \"SEP\"\nlocal function a() return SEP end\n\nlocal SEP = '|'"
	if _, err := libFor(late, "--- @include \"a\"\nreturn a()"); err == nil || !strings.Contains(err.Error(), "defined after it") {
		t.Errorf("a helper including a later one: %v", err)
	}
	// The real loader refuses too: a registry script whose helper went missing.
	body, err := fs.ReadFile(lua.FS, "poll.lua")
	if err != nil {
		t.Fatal(err)
	}
	real, err := fs.ReadFile(lua.FS, "lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	cut := strings.Replace(string(body), "--- @include \"rec_head\"\n", "", 1)
	if cut == string(body) {
		t.Fatal("poll.lua no longer includes rec_head: pick another helper")
	}
	if _, err := libFor(string(real), cut); err == nil || !strings.Contains(err.Error(), "rec_head") {
		t.Errorf("poll.lua without its rec_head include: %v", err)
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
		head, err := libFor(string(lib), string(body))
		if err != nil {
			t.Fatal(err)
		}
		defined := map[string]bool{}
		for _, m := range libDefinition.FindAllStringSubmatch(head, -1) {
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
	evalOnEveryBackend(t, src, want)
}

// TestRegistryHasEveryScript: every script file is in the registry, once, and
// the acknowledged writes are the three whose callers are told of a write.
func TestRegistryHasEveryScript(t *testing.T) {
	files, err := fs.Glob(lua.FS, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, x := range registry {
		seen[x.file]++
	}
	for _, f := range files {
		if f != "lib.lua" && seen[f] != 1 {
			t.Errorf("%s is in the registry %d times, want 1", f, seen[f])
		}
	}
	if len(registry) != len(files)-1 {
		t.Errorf("registry has %d scripts, the folder %d", len(registry), len(files)-1)
	}
	sc, err := loadScripts(nil)
	if err != nil {
		t.Fatal(err)
	}
	var acks []string
	for _, s := range sc.all() {
		if s == nil {
			t.Fatal("a registry entry left its slot empty")
		}
		if s.ack {
			acks = append(acks, s.name)
		}
	}
	if strings.Join(acks, ",") != "create,transition,delete" {
		t.Errorf("acknowledged writes %v, want create, transition, delete", acks)
	}
}

// evalOnEveryBackend runs the Lua source src, with the key {t}k and args, on
// miniredis, redis-server and the Cluster, and fails unless each answers want.
func evalOnEveryBackend(t *testing.T, src string, want []any, args ...any) {
	t.Helper()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			got, err := b.Client(t).Eval(context.Background(), src, []string{"{t}k"}, args...).Slice()
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}
