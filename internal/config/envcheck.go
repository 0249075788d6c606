package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Variables of the ASYNCSTATUS_ family that configure no service but the
// project's own tests and benchmarks: every ASYNCSTATUS_TEST_* and
// ASYNCSTATUS_BENCH_* variable, and these three. UnknownEnv passes over them,
// so that a test run's environment never stops a command.
var testOnlyEnv = []string{"ASYNCSTATUS_UPDATE_DOCS", "ASYNCSTATUS_ARTIFACTS_DIR", "ASYNCSTATUS_WEBHOOK_FIGURES"}

// UnknownEnv returns a problem for every ASYNCSTATUS_* variable in environ
// ("NAME=value" entries, as os.Environ gives them) that names no configuration
// key, with the closest known name, so that a misspelt override is never
// silently ignored: serve and the admin commands refuse to run while one is
// set (docs/operations.md, Configuration). A map key (by_type) has no
// variable, so ASYNCSTATUS_POLLING_BY_TYPE is unknown too and the problem
// says so. The tests' own variables (testOnlyEnv) are not reported.
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

	var problems []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || TestOnlyEnv(name) {
			continue
		}
		if _, ok := known[name]; ok {
			continue
		}
		if key, ok := maps[name]; ok {
			problems = append(problems, fmt.Sprintf("%s: %s is a map, set only in the config file", name, key))
			continue
		}
		w := fmt.Sprintf("%s names no configuration key", name)
		if best := closest(name, names, len(EnvPrefix)); best != "" {
			w += "; did you mean " + best + "?"
		}
		problems = append(problems, w)
	}
	sort.Strings(problems)
	return problems
}

// TestOnlyEnv reports whether name is one of the variables only the
// project's tests and benchmarks read (testOnlyEnv).
func TestOnlyEnv(name string) bool {
	for _, n := range testOnlyEnv {
		if name == n {
			return true
		}
	}
	return strings.HasPrefix(name, EnvPrefix+"TEST_") || strings.HasPrefix(name, EnvPrefix+"BENCH_")
}

// closest is the name of names nearest to s by edit distance, if it is near
// enough to be a likely misspelling (at most 2 edits, or a third of s's
// length past its first skip bytes, a common prefix, when that is more; and
// at least 1 edit away); "" otherwise.
func closest(s string, names []string, skip int) string {
	best, bestD := "", -1
	for _, n := range names {
		if d := editDistance(s, n); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	if bestD <= 0 || bestD > max(2, (len(s)-skip+2)/3) {
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
