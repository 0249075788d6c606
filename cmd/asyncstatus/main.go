// Command asyncstatus serves the status of long-running requests from Redis and
// administers keys and tenants (docs/reference.md §8). main only calls run, which takes its
// whole environment as arguments so that main_test.go can drive the program.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/asyncstatus/asyncstatus/internal/buildinfo"
	"github.com/asyncstatus/asyncstatus/internal/config"
)

// version is a release version stamped at build time (make build VERSION=x.y.z
// passes -ldflags "-X main.version=x.y.z"); without it the toolchain's own
// record names the build (internal/buildinfo).
var version string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "asyncstatus:", err)
		os.Exit(exitCode(err))
	}
}

// run runs one command. environ is the process's environment ("NAME=value"
// entries); a --help answer is printed on stdout and is no error.
func run(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, environ, stdout, stderr)
	if h, ok := err.(helpError); ok {
		fmt.Fprint(stdout, h.text)
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{usage}
	}
	getenv := lookupEnv(environ)
	cmd, rest := args[0], args[1:]
	// A misspelt override would otherwise be silently ignored, and serve would
	// then run on defaults it was not meant to (the embedded store, for a
	// misspelt ASYNCSTATUS_REDIS_URL): the commands that read the configuration
	// refuse to run while a variable names no key (config.UnknownEnv).
	if readsConfig(cmd) && !slices.ContainsFunc(rest, isHelp) {
		if err := unknownEnvError(config.UnknownEnv(environ)); err != nil {
			return err
		}
	}
	switch cmd {
	case "serve":
		return cmdServe(ctx, rest, getenv, stdout, stderr)
	case "keys":
		return cmdKeys(ctx, rest, getenv, stdout, stderr)
	case "tenants":
		return cmdTenants(ctx, rest, getenv, stdout, stderr)
	case "retention":
		return cmdRetention(ctx, rest, getenv, stdout, stderr)
	case "webhooks":
		return cmdWebhooks(ctx, rest, getenv, stdout, stderr)
	case "config":
		return cmdConfig(ctx, rest, getenv, stdout)
	case "requests":
		return cmdRequests(ctx, rest, getenv, stdout, stderr)
	case "healthcheck":
		return cmdHealthcheck(ctx, rest, getenv, stdout)
	case "version":
		fs, _, err := flags("version", rest, stderr, nil)
		if err != nil {
			return err
		}
		if err := positional("version", fs, 0, ""); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "asyncstatus", buildinfo.Read(version))
		return nil
	}
	if isHelp(cmd) {
		return helpError{usage + "\n"}
	}
	return usageError{fmt.Sprintf("unknown command %q\n%s", cmd, usage)}
}

// readsConfig: the commands that load the service's configuration (the
// `requests` commands read only ASYNCSTATUS_URL and the credentials).
func readsConfig(cmd string) bool {
	switch cmd {
	case "serve", "keys", "tenants", "retention", "webhooks", "config":
		return true
	}
	return false
}

// unknownEnvError names every ASYNCSTATUS_* variable that names no key; nil
// when there is none.
func unknownEnvError(problems []string) error {
	switch len(problems) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("environment: %s (unset it, or fix its name: the environment may hold no unknown ASYNCSTATUS_* variable)", problems[0])
	}
	return fmt.Errorf("environment: %d variables name no configuration key (unset them, or fix their names: the environment may hold no unknown ASYNCSTATUS_* variable):\n  %s",
		len(problems), strings.Join(problems, "\n  "))
}

// lookupEnv is os.Getenv over environ: the last entry of a name wins, as in a
// process's environment.
func lookupEnv(environ []string) func(string) string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}
