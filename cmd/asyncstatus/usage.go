package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// usageError marks a command-line mistake (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// helpError: the caller asked for --help. run prints text on stdout and the
// exit status is 0.
type helpError struct{ text string }

func (e helpError) Error() string { return e.text }

func exitCode(err error) int {
	if _, ok := err.(usageError); ok {
		return 2
	}
	if e, ok := err.(interface{ ExitCode() int }); ok { // requests commands (requests.go)
		return e.ExitCode()
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
  asyncstatus healthcheck [--url URL] [--timeout DURATION]
  asyncstatus requests get|list|events|wait ...   (asyncstatus requests --help)
Every command takes --config FILE and ASYNCSTATUS_* environment overrides.
"asyncstatus COMMAND --help" describes a command and its flags.`

// synopsis is the usage line of a command, by the name flags and group know
// it by; "" for a name that is not a command.
func synopsis(name string) string {
	switch name {
	case "serve":
		return "serve [--config FILE] [--log-format json|text]"
	case "keys":
		return "keys create|list|revoke ..."
	case "keys create":
		return "keys create --tenant T --scopes read,write[,admin] [--name NAME] [--config FILE]\n       asyncstatus keys create --operator [--name NAME] [--config FILE]"
	case "keys list":
		return "keys list --tenant T | --operator [--config FILE]"
	case "keys revoke":
		return "keys revoke KEY_ID [--config FILE]"
	case "tenants":
		return "tenants freeze|unfreeze T"
	case "tenants freeze":
		return "tenants freeze T [--config FILE]"
	case "tenants unfreeze":
		return "tenants unfreeze T [--config FILE]"
	case "retention":
		return "retention reapply [--tenant T] [--dry-run] [--config FILE]"
	case "retention reapply":
		return "retention reapply [--tenant T] [--dry-run] [--config FILE]"
	case "webhooks":
		return "webhooks reseal [--tenant T] [--dry-run] [--config FILE]"
	case "webhooks reseal":
		return "webhooks reseal [--tenant T] [--dry-run] [--config FILE]"
	case "config":
		return "config check [--config FILE]"
	case "config check":
		return "config check [--config FILE]"
	case "version":
		return "version"
	case "healthcheck":
		return "healthcheck [--url URL] [--timeout DURATION] [--config FILE]"
	}
	return ""
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// group picks the subcommand of a command that has some (keys, tenants, ...):
// "keys --help" is that command's help (exit 0); no subcommand or an unknown
// one is a usage error naming the choices.
func group(name string, args []string, subs ...string) (string, []string, error) {
	help := "usage: asyncstatus " + synopsis(name) + "\n\nsubcommands:\n"
	for _, s := range subs {
		help += "  asyncstatus " + synopsis(name+" "+s) + "\n"
	}
	if len(args) == 0 {
		return "", nil, usageError{name + ": want a subcommand\n" + help}
	}
	if isHelp(args[0]) {
		return "", nil, helpError{help}
	}
	for _, s := range subs {
		if args[0] == s {
			return s, args[1:], nil
		}
	}
	return "", nil, usageError{fmt.Sprintf("%s: unknown subcommand %q\n%s", name, args[0], help)}
}

// flags parses a command's flags (every command has --config); -h/--help is
// a helpError with the command's usage and flags, a bad flag a usageError
// with the same text. positional is how many arguments the command takes
// after its flags; any other number is a usage error. stderr is not written:
// the error carries the text.
func flags(name string, args []string, _ io.Writer, define func(fs *flag.FlagSet)) (*flag.FlagSet, string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	cfgPath := fs.String("config", "", "configuration file (YAML); default $ASYNCSTATUS_CONFIG")
	if define != nil {
		define(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, "", helpError{commandHelp(name, fs)}
		}
		return nil, "", usageError{name + ": " + err.Error() + "\n" + commandHelp(name, fs)}
	}
	return fs, *cfgPath, nil
}

// commandHelp is "usage: asyncstatus <synopsis>", the flags with their
// defaults, written --name as the synopses write them, and the command's notes
// (serve's configuration guide).
func commandHelp(name string, fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: asyncstatus %s\n", synopsis(name))
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			b.WriteString("\nflags:\n")
			first = false
		}
		arg, text := flag.UnquoteUsage(f)
		switch arg {
		case "":
		case "string":
			arg = " " + strings.ToUpper(f.Name)
			if f.Name == "config" {
				arg = " FILE"
			}
		default:
			arg = " " + arg
		}
		fmt.Fprintf(&b, "  --%s%s\n        %s", f.Name, arg, text)
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(&b, " (default %s)", f.DefValue)
		}
		b.WriteString("\n")
	})
	if name == "serve" {
		b.WriteString(serveConfigHelp)
	}
	return b.String()
}

// serveConfigHelp ends `serve --help`: where the configuration comes from and
// the keys people set first.
var serveConfigHelp = `
configuration:
  Defaults, then the YAML file (--config FILE, else $ASYNCSTATUS_CONFIG), then
  environment variables: every key has one, ASYNCSTATUS_ and the key in upper
  snake case (redis.url is ASYNCSTATUS_REDIS_URL). A variable of that family
  that names no key stops serve, as an unknown key in the file does.
  "asyncstatus config check" prints the effective configuration (secrets
  masked) and every problem at once, without starting anything.
  configs/asyncstatus.yaml (in the source) lists every key with its default.

  The keys people set first:
    http.addr                 the API's listener (default :8080; loopback only
                              when no Redis is configured: set a host, e.g.
                              0.0.0.0:8080, to listen on every interface)
    redis.url                 a single Redis (redis://[:password@]host:port/db)
    redis.cluster_addrs       or a Redis Cluster's seed nodes (host:port,...)
    redis.sentinel_master     or a Sentinel-managed master, with redis.sentinel_addrs
                              (none of the three: the embedded store, for
                              development only; its data is lost at stop)
    auth.poll_token_secret    required with Redis: at least 32 random bytes
    webhooks.secret_key       required with Redis while webhooks.enabled: at
                              least 32 random bytes
    metrics.addr              serve /metrics on its own listener instead of
                              http.addr (where it needs no credential)
    console.addr              the operator console (default 127.0.0.1:8081)
`

// positional checks a command's arguments after its flags: exactly n.
func positional(name string, fs *flag.FlagSet, n int, what string) error {
	if fs.NArg() == n {
		return nil
	}
	if n == 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q\nusage: asyncstatus %s", name, fs.Arg(0), synopsis(name))}
	}
	return usageError{fmt.Sprintf("%s: want exactly %s\nusage: asyncstatus %s", name, what, synopsis(name))}
}
