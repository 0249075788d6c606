package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// UnknownEnv returns a warning for every ASYNCSTATUS_* variable in environ
// ("NAME=value" entries, as os.Environ gives them) that names no configuration
// key, with the closest known name, so that a misspelt override is not
// silently ignored. A map key (by_type) has no variable, so
// ASYNCSTATUS_POLLING_BY_TYPE is unknown too and the warning says so.
func UnknownEnv(environ []string) []string {
	known := map[string]string{} // variable -> key ("" for the others)
	maps := map[string]string{}
	cfg := Defaults()
	walkKeys(reflect.ValueOf(&cfg).Elem(), "", func(key string, v reflect.Value) {
		if v.Kind() == reflect.Map {
			maps[EnvName(key)] = key
			return
		}
		known[EnvName(key)] = key
	})
	// Read by the program but no configuration key: the config file's path
	// and the `requests` commands' connection settings (docs/reference.md §8).
	for _, n := range []string{"ASYNCSTATUS_CONFIG", "ASYNCSTATUS_URL", "ASYNCSTATUS_API_KEY", "ASYNCSTATUS_POLL_TOKEN"} {
		known[n] = ""
	}
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)

	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		// The tests' and benchmarks' own families (ASYNCSTATUS_TEST_REDIS_ADDR,
		// ASYNCSTATUS_BENCH_METER).
		if _, ok := known[name]; ok || strings.HasPrefix(name, EnvPrefix+"TEST_") || strings.HasPrefix(name, EnvPrefix+"BENCH_") {
			continue
		}
		if key, ok := maps[name]; ok {
			warnings = append(warnings, fmt.Sprintf("%s is ignored: %s is a map and is set only in the config file", name, key))
			continue
		}
		w := fmt.Sprintf("%s names no configuration key and is ignored", name)
		if best := closest(name, names); best != "" {
			w += "; did you mean " + best + "?"
		}
		warnings = append(warnings, w)
	}
	sort.Strings(warnings)
	return warnings
}

// closest is the name of names nearest to s by edit distance, if it is near
// enough to be a likely misspelling (at most a third of s's length after the
// prefix, and at least 1 edit away); "" otherwise.
func closest(s string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		if d := editDistance(s, n); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	if bestD < 0 || bestD > (len(s)-len(EnvPrefix)+2)/3 {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
