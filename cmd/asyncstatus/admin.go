package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// adminBackend opens the configured store for a one-shot command.
func adminBackend(cfgPath string, getenv func(string) string, stderr io.Writer) (*backend, error) {
	cfg, err := loadConfig(cfgPath, getenv)
	if err != nil {
		return nil, err
	}
	if cfg.Embedded() {
		fmt.Fprintln(stderr, "warning: no Redis is configured; this command acts on a throw-away embedded store")
	}
	return openBackend(cfg)
}

func cmdKeys(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"keys: want create, list or revoke"}
	}
	switch args[0] {
	case "create":
		var tenant, scopes, name string
		var operator bool
		_, cfgPath, err := flags("keys create", args[1:], stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&tenant, "tenant", "", "tenant the key belongs to")
			fs.StringVar(&scopes, "scopes", "", "read,write[,admin]")
			fs.StringVar(&name, "name", "", "a name to recognise the key by")
			fs.BoolVar(&operator, "operator", false, "a console-only key that sees every tenant (no --tenant, no --scopes)")
		})
		if err != nil {
			return err
		}
		if operator {
			return createOperatorKey(ctx, tenant, scopes, name, cfgPath, getenv, stdout, stderr)
		}
		if !auth.ValidTenant(tenant) {
			return usageError{"keys create: --tenant must match ^[a-z0-9][a-z0-9_-]{0,62}$"}
		}
		sc, err := domain.ParseScopes(scopes)
		if err != nil {
			return usageError{"keys create: --scopes: " + err.(*domain.Error).Message}
		}
		b, err := adminBackend(cfgPath, getenv, stderr)
		if err != nil {
			return err
		}
		defer b.Close()
		plain, k, err := auth.NewKey(tenant, sc, name, time.Now())
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
		_, cfgPath, err := flags("keys list", args[1:], stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&tenant, "tenant", "", "tenant")
			fs.BoolVar(&operator, "operator", false, "list the operator keys instead")
		})
		if err != nil {
			return err
		}
		if operator == auth.ValidTenant(tenant) {
			return usageError{"keys list: want --tenant T or --operator"}
		}
		b, err := adminBackend(cfgPath, getenv, stderr)
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
		fs, cfgPath, err := flags("keys revoke", args[1:], stderr, nil)
		if err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return usageError{"keys revoke: want exactly one KEY_ID"}
		}
		b, err := adminBackend(cfgPath, getenv, stderr)
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
	return usageError{fmt.Sprintf("keys: unknown subcommand %q", args[0])}
}

// createOperatorKey is `keys create --operator` (spec §8, §14).
func createOperatorKey(ctx context.Context, tenant, scopes, name, cfgPath string, getenv func(string) string, stdout, stderr io.Writer) error {
	if tenant != "" || scopes != "" {
		return usageError{"keys create: --operator takes no --tenant or --scopes (it sees every tenant, on the console only)"}
	}
	b, err := adminBackend(cfgPath, getenv, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	plain, k, err := auth.NewOperatorKey(name, time.Now())
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
	if len(args) == 0 || (args[0] != "freeze" && args[0] != "unfreeze") {
		return usageError{"tenants: want freeze T or unfreeze T"}
	}
	fs, cfgPath, err := flags("tenants "+args[0], args[1:], stderr, nil)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 || !auth.ValidTenant(fs.Arg(0)) {
		return usageError{"tenants " + args[0] + ": want exactly one valid tenant name"}
	}
	b, err := adminBackend(cfgPath, getenv, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.store.SetFrozen(ctx, fs.Arg(0), args[0] == "freeze"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tenant %s %s\n", fs.Arg(0), map[string]string{"freeze": "frozen", "unfreeze": "unfrozen"}[args[0]])
	return nil
}

func cmdConfig(_ context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return usageError{"config: want check"}
	}
	_, cfgPath, err := flags("config check", args[1:], io.Discard, nil)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(cfgPath, getenv)
	if err != nil {
		return err
	}
	out, err := cfg.Masked().YAML()
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "# configuration is valid; effective values (secrets masked):")
	_, err = stdout.Write(out)
	return err
}
