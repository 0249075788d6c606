package main

import (
	"io/fs"
	"math"
	"path"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// setMaxProcs applies runtime.max_procs (0 keeps Go's choice) and returns the
// GOMAXPROCS serve runs with. It comes before the Redis clients are made, whose
// default pool size follows GOMAXPROCS. Fewer CPUs can serve more: on a machine
// shared with Redis, one P keeps the goroutines that hand a call to each other
// (a request, the autopipeliner, the reply) on one thread (docs/performance.md,
// item 16).
func setMaxProcs(n int) int {
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
	return runtime.GOMAXPROCS(0)
}

// setGCPercent applies runtime.gc_percent (0 keeps Go's 100) unless the
// environment sets GOGC, which the runtime has read already and which wins.
// It returns the percentage serve runs with (-1: collection off, GOGC=off).
func setGCPercent(n int, getenv func(string) string) int {
	if getenv("GOGC") != "" || n <= 0 {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(n)
	return n
}

// memoryLimitShare is the part of the cgroup's memory.max that an automatic
// limit gives the Go heap: the rest is for what the runtime does not count
// as its own (the binary's mapped text, kernel buffers of sockets).
const memoryLimitShare = 0.9

// setMemoryLimit applies runtime.memory_limit_bytes unless the environment
// sets GOMEMLIMIT, which the runtime has read already and which wins: n > 0
// is the limit, n < 0 none, and 0 sets memoryLimitShare of the memory.max of
// the cgroup serve runs in (read through root: a container's limit, a systemd
// unit's MemoryMax) when it has one. The limit is soft: near it the collector
// runs more often, whatever runtime.gc_percent says, so that a heap grown by
// held long polls under gc_percent 400 stays inside the container rather than
// being killed. It returns the limit serve runs with, -1 for none.
func setMemoryLimit(n int64, getenv func(string) string, root fs.FS) int64 {
	switch {
	case getenv("GOMEMLIMIT") != "":
	case n > 0:
		debug.SetMemoryLimit(n)
	case n == 0:
		if max := cgroupMemoryMax(root); max > 0 {
			debug.SetMemoryLimit(int64(float64(max) * memoryLimitShare))
		}
	}
	if lim := debug.SetMemoryLimit(-1); lim != math.MaxInt64 {
		return lim
	}
	return -1
}

// cgroupMemoryMax is the memory limit (bytes) of the cgroup this process is
// in, as root (the file system's root) shows it. cgroup v2: memory.max of the
// cgroup named by /proc/self/cgroup's "0::" line, else of the cgroup file
// system's root, which inside a container's cgroup namespace is the
// container's own. cgroup v1 (older hosts): memory.limit_in_bytes, the same
// way, under the memory controller's hierarchy. 0 when there is none ("max",
// or v1's page-counter maximum), or nothing readable.
func cgroupMemoryMax(root fs.FS) int64 {
	var files []string
	if b, err := fs.ReadFile(root, "proc/self/cgroup"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			// "hierarchy-id:controllers:path"; v2's is "0::path"
			id, rest, _ := strings.Cut(line, ":")
			controllers, p, ok := strings.Cut(rest, ":")
			switch {
			case !ok:
			case id == "0" && controllers == "":
				files = append(files, path.Join("sys/fs/cgroup", strings.Trim(p, "/"), "memory.max"))
			case slices.Contains(strings.Split(controllers, ","), "memory"):
				files = append(files, path.Join("sys/fs/cgroup/memory", strings.Trim(p, "/"), "memory.limit_in_bytes"))
			}
		}
	}
	files = append(files, "sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, f := range files {
		b, err := fs.ReadFile(root, f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= noV1Limit {
			return 0 // "max": this cgroup has no limit
		}
		return n
	}
	return 0
}

// noV1Limit: cgroup v1 says "no limit" with the page counter's maximum in
// bytes (9223372036854771712 with 4 KiB pages); no real limit comes near.
const noV1Limit = 1 << 62
