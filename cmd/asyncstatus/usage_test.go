package main

import (
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

// TestWarnsAboutUnknownVariables: a misspelt override is named, with the key
// it was probably meant for, by serve's log and by the other commands.
func TestWarnsAboutUnknownVariables(t *testing.T) {
	env := map[string]string{"ASYNCSTATUS_RETENTON_TERMINAL": "1h"}
	const want = "ASYNCSTATUS_RETENTON_TERMINAL names no configuration key and is ignored; did you mean ASYNCSTATUS_RETENTION_TERMINAL?"
	_, errOut, err := runCmd(t, env, "config", "check")
	if err != nil || !strings.Contains(errOut, "warning: "+want) {
		t.Fatalf("config check: %v, stderr %q", err, errOut)
	}
	_, _, logs, stop := startServe(t, env)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"`+want+`"`) {
		t.Fatalf("serve's log does not warn about the variable:\n%s", logs.String())
	}
}
