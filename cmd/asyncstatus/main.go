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
	// A misspelt override is otherwise silently ignored. serve logs the
	// warnings with its logger; the other commands print them.
	unknown := config.UnknownEnv(environ)
	if cmd != "serve" && cmd != "version" && cmd != "requests" && !isHelp(cmd) {
		for _, w := range unknown {
			fmt.Fprintln(stderr, "warning:", w)
		}
	}
	switch cmd {
	case "serve":
		return cmdServe(ctx, rest, getenv, unknown, stdout, stderr)
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
