package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// adminBackend opens the configured store for a one-shot command named name.
// With no Redis configured there is only a throw-away embedded store, which
// no running serve reads: a command that would change state there (changes)
// is refused, since its effect would be a lie (a key no server knows, a
// tenant "frozen" nowhere); one that only reads is let through with a warning.
func adminBackend(name, cfgPath string, getenv func(string) string, changes bool, stderr io.Writer) (*backend, error) {
	cfg, err := loadConfig(cfgPath, getenv)
	if err != nil {
		return nil, err
	}
	if cfg.Embedded() {
		if changes {
			return nil, noRedisError(name)
		}
		fmt.Fprintln(stderr, "warning: no Redis is configured; this command reads a throw-away embedded store that no serve uses")
	}
	return openBackend(cfg)
}

// noRedisError refuses an admin command that changes state on the embedded store.
func noRedisError(name string) error {
	return fmt.Errorf("%s: no Redis is configured, so this would change a throw-away embedded store that no running serve reads; "+
		"point it at the Redis your serve uses: set %s (or redis.cluster_addrs, or redis.sentinel_master with redis.sentinel_addrs) "+
		"in the environment or in the file given with --config. (A serve on the embedded store prints a demo key with every scope instead.)",
		name, config.EnvName("redis.url"))
}

func cmdKeys(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := group("keys", args, "create", "list", "revoke")
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		var tenant, scopes, name string
		var operator bool
		fs, cfgPath, err := flags("keys create", args, stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&tenant, "tenant", "", "tenant the key belongs to")
			fs.StringVar(&scopes, "scopes", "", "read,write[,admin]")
			fs.StringVar(&name, "name", "", "a name to recognise the key by")
			fs.BoolVar(&operator, "operator", false, "a console-only key that sees every tenant (no --tenant, no --scopes)")
		})
		if err != nil {
			return err
		}
		if err := positional("keys create", fs, 0, ""); err != nil {
			return err
		}
		if operator {
			return createOperatorKey(ctx, tenant, scopes, name, cfgPath, getenv, stdout, stderr)
		}
		switch {
		case tenant == "":
			return usageError{"keys create: --tenant is required\nusage: asyncstatus " + synopsis("keys create")}
		case !auth.ValidTenant(tenant):
			return usageError{"keys create: --tenant must match ^[a-z0-9][a-z0-9_-]{0,62}$"}
		case scopes == "":
			return usageError{"keys create: --scopes is required (read, write, admin, comma-separated)\nusage: asyncstatus " + synopsis("keys create")}
		}
		sc, err := domain.ParseScopes(scopes)
		if err != nil {
			return usageError{"keys create: --scopes: " + err.(*domain.Error).Message}
		}
		b, err := adminBackend("keys create", cfgPath, getenv, true, stderr)
		if err != nil {
			return err
		}
		defer b.Close()
		issuer, err := keyIssuer(cfgPath, getenv, b)
		if err != nil {
			return err
		}
		plain, k, err := issuer.NewKey(tenant, sc, name, time.Now())
		if err != nil {
			return err
		}
		if err := b.store.SaveKey(ctx, k); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "created %s for tenant %s with scopes %s; the key is shown once:\n", k.ID, tenant, sc)
		fmt.Fprintln(stdout, plain)
		return nil
	case "list":
		var tenant string
		var operator bool
		fs, cfgPath, err := flags("keys list", args, stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&tenant, "tenant", "", "tenant")
			fs.BoolVar(&operator, "operator", false, "list the operator keys instead")
		})
		if err != nil {
			return err
		}
		if err := positional("keys list", fs, 0, ""); err != nil {
			return err
		}
		if operator == auth.ValidTenant(tenant) {
			return usageError{"keys list: want --tenant T or --operator"}
		}
		b, err := adminBackend("keys list", cfgPath, getenv, false, stderr)
		if err != nil {
			return err
		}
		defer b.Close()
		var keys []domain.APIKey
		if operator {
			keys, err = b.store.ListOperatorKeys(ctx)
		} else {
			keys, err = b.store.ListKeys(ctx, tenant)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%-22s  %-16s  %-24s  %s\n", "ID", "SCOPES", "CREATED", "NAME")
		for _, k := range keys {
			scopes := k.Scopes.String()
			if k.Operator {
				scopes = "operator"
			}
			fmt.Fprintf(stdout, "%-22s  %-16s  %-24s  %s\n", k.ID, scopes, k.CreatedAt.Format(time.RFC3339), k.Name)
		}
		return nil
	case "revoke":
		fs, cfgPath, err := flags("keys revoke", args, stderr, nil)
		if err != nil {
			return err
		}
		if err := positional("keys revoke", fs, 1, "one KEY_ID"); err != nil {
			return err
		}
		b, err := adminBackend("keys revoke", cfgPath, getenv, true, stderr)
		if err != nil {
			return err
		}
		defer b.Close()
		if err := b.store.RevokeKey(ctx, fs.Arg(0)); err != nil {
			if domain.ErrorCode(err) == domain.NotFound {
				return fmt.Errorf("keys revoke: no key %s", fs.Arg(0))
			}
			return err
		}
		fmt.Fprintf(stdout, "revoked %s\n", fs.Arg(0))
		return nil
	}
	return nil
}

// createOperatorKey is `keys create --operator` (docs/reference.md §8, §14).
func createOperatorKey(ctx context.Context, tenant, scopes, name, cfgPath string, getenv func(string) string, stdout, stderr io.Writer) error {
	if tenant != "" || scopes != "" {
		return usageError{"keys create: --operator takes no --tenant or --scopes (it sees every tenant, on the console only)"}
	}
	b, err := adminBackend("keys create", cfgPath, getenv, true, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	issuer, err := keyIssuer(cfgPath, getenv, b)
	if err != nil {
		return err
	}
	plain, k, err := issuer.NewOperatorKey(name, time.Now())
	if err != nil {
		return err
	}
	if err := b.store.SaveKey(ctx, k); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "created operator key %s (console only, every tenant); the key is shown once:\n", k.ID)
	fmt.Fprintln(stdout, plain)
	return nil
}

func cmdTenants(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := group("tenants", args, "freeze", "unfreeze")
	if err != nil {
		return err
	}
	fs, cfgPath, err := flags("tenants "+sub, args, stderr, nil)
	if err != nil {
		return err
	}
	if err := positional("tenants "+sub, fs, 1, "one tenant name"); err != nil {
		return err
	}
	if !auth.ValidTenant(fs.Arg(0)) {
		return usageError{"tenants " + sub + ": the tenant name must match ^[a-z0-9][a-z0-9_-]{0,62}$"}
	}
	b, err := adminBackend("tenants "+sub, cfgPath, getenv, true, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.store.SetFrozen(ctx, fs.Arg(0), sub == "freeze"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tenant %s %s\n", fs.Arg(0), map[string]string{"freeze": "frozen", "unfreeze": "unfrozen"}[sub])
	return nil
}

func cmdConfig(_ context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	_, args, err := group("config", args, "check")
	if err != nil {
		return err
	}
	fs, cfgPath, err := flags("config check", args, io.Discard, nil)
	if err != nil {
		return err
	}
	if err := positional("config check", fs, 0, ""); err != nil {
		return err
	}
	cfg, err := loadServeConfig(cfgPath, getenv)
	if err != nil {
		return err
	}
	out, err := cfg.Masked().YAML()
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "# configuration is valid; effective values (secrets masked):")
	if cfg.Embedded() {
		fmt.Fprint(stdout, embeddedNote)
	}
	_, err = stdout.Write(out)
	return err
}

// keyIssuer makes keys with the keyed check serve verifies: it needs the same
// secrets (auth.key_check_secret, else auth.poll_token_secret).
func keyIssuer(cfgPath string, getenv func(string) string, b *backend) (*auth.Authenticator, error) {
	cfg, err := loadConfig(cfgPath, getenv)
	if err != nil {
		return nil, err
	}
	secret, err := pollSecret(cfg)
	if err != nil {
		return nil, fmt.Errorf("keys create: %w", err)
	}
	return newAuthenticator(cfg, b.store, secret), nil
}

// embeddedNote is what `config check` says when no Redis is configured.
var embeddedNote = `#
# NO REDIS IS CONFIGURED: serve would run the embedded store, for development
# only. Its data lives in the serve process and is lost when it stops; it
# serves one replica, at a few thousand calls a second; the admin commands that
# change state refuse to run. For anything else set ` + config.EnvName("redis.url") + `
# (or redis.cluster_addrs, or redis.sentinel_master), with auth.poll_token_secret
# and webhooks.secret_key.
#
`
