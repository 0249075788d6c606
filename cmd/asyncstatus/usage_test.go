package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpAndStrayArguments: every command and subcommand answers --help with
// its usage on stdout and exit status 0, and refuses arguments it does not
// take with a usage error (exit status 2), before it opens any store.
func TestHelpAndStrayArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the help text
	}{
		{[]string{"--help"}, "asyncstatus serve"},
		{[]string{"help"}, "asyncstatus keys create"},
		{[]string{"serve", "--help"}, "--log-format"},
		{[]string{"serve", "-h"}, "usage: asyncstatus serve"},
		{[]string{"keys", "--help"}, "asyncstatus keys revoke KEY_ID"},
		{[]string{"keys", "create", "--help"}, "--scopes"},
		{[]string{"keys", "list", "--help"}, "--tenant"},
		{[]string{"keys", "revoke", "--help"}, "usage: asyncstatus keys revoke KEY_ID"},
		{[]string{"tenants", "--help"}, "asyncstatus tenants unfreeze T"},
		{[]string{"tenants", "freeze", "--help"}, "usage: asyncstatus tenants freeze T"},
		{[]string{"retention", "--help"}, "reapply"},
		{[]string{"retention", "reapply", "--help"}, "--dry-run"},
		{[]string{"webhooks", "--help"}, "reseal"},
		{[]string{"webhooks", "reseal", "--help"}, "--dry-run"},
		{[]string{"config", "--help"}, "config check"},
		{[]string{"config", "check", "--help"}, "--config"},
		{[]string{"version", "--help"}, "usage: asyncstatus version"},
	} {
		out, errOut, err := runCmd(t, nil, c.args...)
		if err != nil || !strings.Contains(out, c.want) || strings.Contains(out, "flag: help requested") || errOut != "" {
			t.Errorf("%v: err %v, stdout %q, stderr %q; want exit 0 and usage naming %q on stdout", c.args, err, out, errOut, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"serve", "extra-arg"}, `unexpected argument "extra-arg"`},
		{[]string{"keys"}, "want a subcommand"},
		{[]string{"keys", "rotate"}, `unknown subcommand "rotate"`},
		{[]string{"keys", "create", "--tenant", "acme"}, "--scopes is required"},
		{[]string{"keys", "create", "--scopes", "read"}, "--tenant is required"},
		{[]string{"keys", "create", "--tenant", "acme", "--scopes", "read", "stray"}, `unexpected argument "stray"`},
		{[]string{"keys", "list", "--tenant", "acme", "stray"}, `unexpected argument "stray"`},
		{[]string{"keys", "revoke"}, "want exactly one KEY_ID"},
		{[]string{"keys", "revoke", "a", "b"}, "want exactly one KEY_ID"},
		{[]string{"tenants", "freeze"}, "want exactly one tenant name"},
		{[]string{"retention"}, "want a subcommand"},
		{[]string{"retention", "reapply", "stray"}, `unexpected argument "stray"`},
		{[]string{"webhooks", "reseal", "--frob"}, "flag provided but not defined: -frob"},
		{[]string{"config", "check", "stray"}, `unexpected argument "stray"`},
		{[]string{"version", "stray"}, `unexpected argument "stray"`},
	} {
		_, _, err := runCmd(t, nil, c.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v (exit %d), want exit 2 naming %q", c.args, err, exitCode(err), c.want)
		}
	}
}

// TestConfigCheckAppliesServeRules: a configuration serve refuses is not
// called valid by config check.
func TestConfigCheckAppliesServeRules(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://127.0.0.1:1/0"}, "auth.poll_token_secret"},
		{map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://127.0.0.1:1/0",
			"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": strings.Repeat("s", 32)}, "webhooks.secret_key"},
		{map[string]string{"ASYNCSTATUS_WEBHOOKS_SECRET_KEY": "short"}, "webhooks.secret_key"},
	} {
		_, _, checkErr := runCmd(t, c.env, "config", "check")
		_, _, serveErr := runCmd(t, c.env, "serve")
		if checkErr == nil || serveErr == nil || !strings.Contains(checkErr.Error(), c.want) || checkErr.Error() != serveErr.Error() {
			t.Errorf("%v: config check %v, serve %v; want both to refuse naming %s", c.env, checkErr, serveErr, c.want)
		}
	}
}

// TestRefusesUnknownVariables: a variable of the ASYNCSTATUS_ family that
// names no key stops serve and every admin command, naming every such
// variable with the key it was probably meant for, before anything starts
// (a misspelt ASYNCSTATUS_REDIS_URL must not leave serve on the embedded
// store). The tests' own variables, --help and the requests commands pass.
func TestRefusesUnknownVariables(t *testing.T) {
	env := map[string]string{"ASYNCSTATUS_REDIS_ULR": "redis://127.0.0.1:1/0", "ASYNCSTATUS_RETENTON_TERMINAL": "1h",
		"ASYNCSTATUS_TEST_REDIS_ADDR": "127.0.0.1:1", "ASYNCSTATUS_UPDATE_DOCS": "1", "ASYNCSTATUS_BENCH_METER": "x"}
	want := []string{"environment: 2 variables name no configuration key",
		"ASYNCSTATUS_REDIS_ULR names no configuration key; did you mean ASYNCSTATUS_REDIS_URL?",
		"ASYNCSTATUS_RETENTON_TERMINAL names no configuration key; did you mean ASYNCSTATUS_RETENTION_TERMINAL?"}
	for _, args := range [][]string{{"serve"}, {"config", "check"}, {"keys", "list", "--tenant", "acme"},
		{"keys", "create", "--tenant", "acme", "--scopes", "read"}, {"tenants", "freeze", "acme"},
		{"retention", "reapply", "--dry-run"}, {"webhooks", "reseal", "--dry-run"}} {
		out, _, err := runCmd(t, env, args...)
		if err == nil || exitCode(err) != 1 {
			t.Errorf("%v: err %v, stdout %q; want a refusal", args, err, out)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v\nwant it to name %q", args, err, w)
			}
		}
		if strings.Contains(err.Error(), "TEST_REDIS_ADDR") || strings.Contains(err.Error(), "UPDATE_DOCS") || strings.Contains(err.Error(), "BENCH") {
			t.Errorf("%v: names a test-only variable: %v", args, err)
		}
	}
	if out, _, err := runCmd(t, env, "serve", "--help"); err != nil || !strings.Contains(out, "usage: asyncstatus serve") {
		t.Errorf("serve --help: %v %q", err, out)
	}
	if out, _, err := runCmd(t, env, "version"); err != nil || !strings.HasPrefix(out, "asyncstatus ") {
		t.Errorf("version: %v %q", err, out)
	}
	// The test-only variables alone stop nothing.
	delete(env, "ASYNCSTATUS_REDIS_ULR")
	delete(env, "ASYNCSTATUS_RETENTON_TERMINAL")
	if _, _, err := runCmd(t, env, "config", "check"); err != nil {
		t.Errorf("config check with the tests' variables: %v", err)
	}
}

// TestStateChangingAdminNeedsRedis: with no Redis configured, the admin
// commands that would change state refuse (exit 1), saying why and what to
// set, and change nothing; those that only read warn and run.
func TestStateChangingAdminNeedsRedis(t *testing.T) {
	for _, args := range [][]string{
		{"keys", "create", "--tenant", "acme", "--scopes", "read"},
		{"keys", "create", "--operator"},
		{"keys", "revoke", "key_0123456789abcdef"},
		{"tenants", "freeze", "demo"},
		{"tenants", "unfreeze", "demo"},
		{"retention", "reapply"},
		{"webhooks", "reseal"},
	} {
		env := map[string]string{}
		if args[0] == "webhooks" {
			env["ASYNCSTATUS_WEBHOOKS_SECRET_KEY"] = strings.Repeat("w", 32)
		}
		out, _, err := runCmd(t, env, args...)
		if err == nil || exitCode(err) != 1 || out != "" {
			t.Errorf("%v: err %v, stdout %q; want exit 1 and nothing on stdout", args, err, out)
			continue
		}
		for _, w := range []string{"no Redis is configured", "throw-away embedded store", "ASYNCSTATUS_REDIS_URL", "--config"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v\nwant it to say %q", args, err, w)
			}
		}
	}
	for _, args := range [][]string{{"keys", "list", "--tenant", "acme"}, {"retention", "reapply", "--dry-run"}} {
		_, errOut, err := runCmd(t, map[string]string{}, args...)
		if err != nil || !strings.Contains(errOut, "warning: no Redis is configured") {
			t.Errorf("%v: err %v, stderr %q; want it to run with a warning", args, err, errOut)
		}
	}
}

// TestConfigCheckNamesTheEmbeddedStore: with no Redis configured, config check
// says that serve would run the development-only embedded store; with Redis,
// it does not.
func TestConfigCheckNamesTheEmbeddedStore(t *testing.T) {
	out, _, err := runCmd(t, map[string]string{}, "config", "check")
	if err != nil || !strings.Contains(out, "NO REDIS IS CONFIGURED") || !strings.Contains(out, "development") ||
		!strings.Contains(out, "lost when it stops") {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	out, _, err = runCmd(t, map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://127.0.0.1:1/0",
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": strings.Repeat("s", 32), "ASYNCSTATUS_WEBHOOKS_SECRET_KEY": strings.Repeat("w", 32)}, "config", "check")
	if err != nil || strings.Contains(out, "NO REDIS") || !strings.Contains(out, "configuration is valid") {
		t.Fatalf("config check with Redis: %v\n%s", err, out)
	}
}

// TestConfigProblemsAtOnce: serve and config check name every missing secret
// and every bad key in one error, under one prefix, with a "did you mean" for
// a misspelt key of the file.
func TestConfigProblemsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("redis:\n  url: redis://127.0.0.1:1/0\nhttp:\n  adr: :8080\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"serve", "--config", path}, {"config", "check", "--config", path}} {
		_, _, err := runCmd(t, map[string]string{}, args...)
		if err == nil {
			t.Fatalf("%v: no error", args)
		}
		msg := err.Error()
		for _, w := range []string{"configuration: 3 problems:", "http.adr: unknown key; did you mean http.addr?",
			"auth.poll_token_secret: required", "webhooks.secret_key: required"} {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: %s\nwant it to name %q", args, msg, w)
			}
		}
		if strings.Count(msg, "configuration:") != 1 || strings.Contains(msg, "config: ") {
			t.Errorf("%v: the prefix repeats: %s", args, msg)
		}
	}
}

// TestServeHelpExplainsConfiguration: serve --help writes its flags with two
// dashes and says where configuration comes from and which keys come first.
func TestServeHelpExplainsConfiguration(t *testing.T) {
	out, _, err := runCmd(t, nil, "serve", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"  --config FILE", "  --log-format json|text", "ASYNCSTATUS_REDIS_URL", "config check",
		"http.addr", "redis.url", "auth.poll_token_secret", "webhooks.secret_key", "metrics.addr"} {
		if !strings.Contains(out, w) {
			t.Errorf("serve --help lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "\n  -config") || strings.Contains(out, "\n  -log-format") {
		t.Errorf("serve --help shows single-dash flags:\n%s", out)
	}
}
