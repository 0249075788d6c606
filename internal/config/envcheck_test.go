package config

import (
	"reflect"
	"testing"
)

func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{
		"PATH=/usr/bin",
		"ASYNCSTATUS_RETENTION_TERMINAL=1h",    // a key
		"ASYNCSTATUS_RETENTON_TERMINAL=1h",     // a typo of one
		"ASYNCSTATUS_CONFIG=/etc/as.yaml",      // the file's path
		"ASYNCSTATUS_URL=http://x",             // the requests commands'
		"ASYNCSTATUS_TEST_REDIS_ADDR=x",        // the tests'
		"ASYNCSTATUS_TEST_CLUSTER_ADDRS=x",     // the tests'
		"ASYNCSTATUS_BENCH_METER=callgrind",    // the benchmarks'
		"ASYNCSTATUS_UPDATE_DOCS=1",            // the browser test's
		"ASYNCSTATUS_ARTIFACTS_DIR=/tmp/a",     // the browser test's
		"ASYNCSTATUS_WEBHOOK_FIGURES=1",        // the webhook figures'
		"ASYNCSTATUS_POLLING_BY_TYPE=x",        // a map: file only
		"ASYNCSTATUS_COMPLETELY_DIFFERENT=1",   // nothing close
		"ASYNCSTATUS_HTTP_ADR=:8080",           // a typo
		"ASYNCSTATUS_REDIS_ULR=redis://x:1",    // the typo
		"ASYNCSTATUS_REDIS_URL",                // no '=': still a name
		"asyncstatus_redis_url=lower is other", // not ours
	})
	want := []string{
		"ASYNCSTATUS_COMPLETELY_DIFFERENT names no configuration key",
		"ASYNCSTATUS_HTTP_ADR names no configuration key; did you mean ASYNCSTATUS_HTTP_ADDR?",
		"ASYNCSTATUS_POLLING_BY_TYPE: polling.by_type is a map, set only in the config file",
		"ASYNCSTATUS_REDIS_ULR names no configuration key; did you mean ASYNCSTATUS_REDIS_URL?",
		"ASYNCSTATUS_RETENTON_TERMINAL names no configuration key; did you mean ASYNCSTATUS_RETENTION_TERMINAL?",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("UnknownEnv:\n got %q\nwant %q", got, want)
	}
}
