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
		"ASYNCSTATUS_POLLING_BY_TYPE=x",        // a map: file only
		"ASYNCSTATUS_COMPLETELY_DIFFERENT=1",   // nothing close
		"ASYNCSTATUS_HTTP_ADR=:8080",           // a typo
		"ASYNCSTATUS_REDIS_URL",                // no '=': still a name
		"asyncstatus_redis_url=lower is other", // not ours
	})
	want := []string{
		"ASYNCSTATUS_COMPLETELY_DIFFERENT names no configuration key and is ignored",
		"ASYNCSTATUS_HTTP_ADR names no configuration key and is ignored; did you mean ASYNCSTATUS_HTTP_ADDR?",
		"ASYNCSTATUS_POLLING_BY_TYPE is ignored: polling.by_type is a map and is set only in the config file",
		"ASYNCSTATUS_RETENTON_TERMINAL names no configuration key and is ignored; did you mean ASYNCSTATUS_RETENTION_TERMINAL?",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("UnknownEnv:\n got %q\nwant %q", got, want)
	}
}
