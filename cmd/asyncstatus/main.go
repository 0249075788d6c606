// Command asyncstatus serves the status of long-running requests from Redis and
// administers keys and tenants (spec §8). main only calls run, which takes its
// whole environment as arguments so that main_test.go can drive the program.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "asyncstatus:", err)
		os.Exit(exitCode(err))
	}
}

// usageError marks a command-line mistake (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	if _, ok := err.(usageError); ok {
		return 2
	}
	return 1
}

const usage = `usage:
  asyncstatus serve [--config FILE]
  asyncstatus keys create --tenant T --scopes read,write[,admin] [--name NAME]
  asyncstatus keys create --operator [--name NAME]
  asyncstatus keys list --tenant T | --operator
  asyncstatus keys revoke KEY_ID
  asyncstatus tenants freeze T | unfreeze T
  asyncstatus retention reapply [--tenant T] [--dry-run]
  asyncstatus webhooks reseal [--tenant T] [--dry-run]
  asyncstatus config check [--config FILE]
  asyncstatus version
Every command takes --config FILE and ASYNCSTATUS_* environment overrides.`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{usage}
	}
	cmd, rest := args[0], args[1:]
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
	case "version":
		fmt.Fprintln(stdout, "asyncstatus", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q\n%s", cmd, usage)}
}
