package main

import (
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// TestCgroupMemoryMax: the limit is read from the process's own cgroup (v2's
// memory.max, v1's memory.limit_in_bytes), else from the cgroup file system's
// root (a container's namespace); none when it says max (v1: the page
// counter's maximum), or nothing is readable.
func TestCgroupMemoryMax(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, c := range []struct {
		name string
		fs   fstest.MapFS
		want int64
	}{
		{"container namespace", fstest.MapFS{"proc/self/cgroup": file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("536870912\n")}, 536870912},
		{"systemd unit", fstest.MapFS{"proc/self/cgroup": file("0::/system.slice/asyncstatus.service\n"),
			"sys/fs/cgroup/system.slice/asyncstatus.service/memory.max": file("1073741824\n")}, 1073741824},
		{"own cgroup unlimited", fstest.MapFS{"proc/self/cgroup": file("0::/user.slice\n"),
			"sys/fs/cgroup/user.slice/memory.max": file("max\n"), "sys/fs/cgroup/memory.max": file("1000\n")}, 0},
		{"own cgroup without the file", fstest.MapFS{"proc/self/cgroup": file("0::/init.scope\n"),
			"sys/fs/cgroup/memory.max": file("2000\n")}, 2000},
		{"cgroup v1 without the files", fstest.MapFS{"proc/self/cgroup": file("12:memory:/docker/abc\n")}, 0},
		{"cgroup v1", fstest.MapFS{"proc/self/cgroup": file("5:devices:/\n4:cpu,memory:/docker/abc\n0::/\n"),
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": file("268435456\n")}, 268435456},
		{"cgroup v1 unlimited", fstest.MapFS{"proc/self/cgroup": file("4:memory:/process_api/5c6d\n0::/\n"),
			"sys/fs/cgroup/memory/process_api/5c6d/memory.limit_in_bytes": file("9223372036854771712\n")}, 0},
		{"cgroup v1 namespace root", fstest.MapFS{"proc/self/cgroup": file("4:memory:/\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("1048576\n")}, 1048576},
		{"nothing readable", fstest.MapFS{}, 0},
		{"not a number", fstest.MapFS{"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/memory.max": file("lots\n")}, 0},
	} {
		if got := cgroupMemoryMax(c.fs); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestSetMemoryLimit: runtime.memory_limit_bytes 0 gives the heap 90% of the
// cgroup's limit, a number is taken as it is, -1 sets none, and GOMEMLIMIT in
// the environment wins over the key.
func TestSetMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	limited := fstest.MapFS{"proc/self/cgroup": {Data: []byte("0::/\n")},
		"sys/fs/cgroup/memory.max": {Data: []byte("1000000000\n")}}
	noEnv := func(string) string { return "" }
	for _, c := range []struct {
		name   string
		n      int64
		getenv func(string) string
		root   fstest.MapFS
		want   int64
	}{
		{"auto, limited cgroup", 0, noEnv, limited, 900000000},
		{"auto, no limit", 0, noEnv, fstest.MapFS{}, -1},
		{"bytes", 64 << 20, noEnv, limited, 64 << 20},
		{"none", -1, noEnv, limited, -1},
		{"GOMEMLIMIT wins", 64 << 20, func(k string) string { return map[string]string{"GOMEMLIMIT": "1GiB"}[k] }, limited, -1},
	} {
		debug.SetMemoryLimit(math.MaxInt64) // as a process starts without GOMEMLIMIT
		got := setMemoryLimit(c.n, c.getenv, c.root)
		if now := debug.SetMemoryLimit(-1); got != c.want || (c.want > 0 && now != c.want) || (c.want < 0 && now != math.MaxInt64) {
			t.Errorf("%s: returned %d, runtime's limit %d; want %d", c.name, got, now, c.want)
		}
	}
}

// TestServeAppliesGCPercent: runtime.gc_percent sets the collector's target
// before serve starts and the start line says it; a GOGC in the environment
// (which the runtime read) keeps the key from applying.
func TestServeAppliesGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	for _, c := range []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{"ASYNCSTATUS_RUNTIME_GC_PERCENT": "250"}, 250},
		{map[string]string{}, 400}, // the default
		{map[string]string{"ASYNCSTATUS_RUNTIME_GC_PERCENT": "250", "GOGC": "100"}, 100},
	} {
		debug.SetGCPercent(100)
		_, _, errb, stop := startServe(t, c.env)
		got := debug.SetGCPercent(100)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got != c.want || !strings.Contains(errb.String(), `"gc_percent":`+strconv.Itoa(c.want)) {
			t.Fatalf("env %v: GC percent %d, want %d; log:\n%s", c.env, got, c.want, errb.String())
		}
	}
}
