package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/store"
)

// progressEvery is how many records pass between two progress lines.
const progressEvery = 1000

// cmdRetention runs `asyncstatus retention reapply [--tenant T] [--dry-run]`: it
// applies the configured retention (retention.terminal, retention.by_type) to the
// terminal records that already exist, which otherwise keep the expiry they were
// given when they finished. Progress goes to stderr, the summary to stdout.
func cmdRetention(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	_, args, err := group("retention", args, "reapply")
	if err != nil {
		return err
	}
	tenant, dry, cfgPath, err := tenantRunFlags("retention reapply", "every tenant", args, stderr)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(cfgPath, getenv)
	if err != nil {
		return err
	}
	b, err := adminBackend("retention reapply", cfgPath, getenv, !dry, stderr)
	if err != nil {
		return err
	}
	defer b.Close()

	scope := "every tenant"
	if tenant != "" {
		scope = "tenant " + tenant
	}
	if dry {
		fmt.Fprintf(stderr, "reapply (dry run, nothing is changed): counting what applying %s to the terminal records of %s would do\n",
			describeRetention(cfg.Retention), scope)
	} else {
		fmt.Fprintf(stderr, "reapply: applying %s to the terminal records of %s\n", describeRetention(cfg.Retention), scope)
	}
	start := time.Now()
	next := int64(progressEvery)
	p, err := b.store.ReapplyRetention(ctx, store.ReapplyOptions{Tenant: tenant, DryRun: dry, Progress: func(p store.ReapplyProgress) {
		if p.Seen < next {
			return
		}
		for next <= p.Seen {
			next += progressEvery
		}
		fmt.Fprintf(stderr, "reapply: at tenant %s (%d so far): %s, %.0f records/s\n", p.Tenant, p.Tenants, counts(p),
			float64(p.Seen)/max(time.Since(start).Seconds(), 0.001))
	}})
	if err != nil {
		fmt.Fprintf(stderr, "reapply: stopped after %s; running it again is safe\n", counts(p))
		return fmt.Errorf("retention reapply: %w", err)
	}
	done := "retention reapplied"
	if dry {
		done = "dry run, nothing changed; retention would be reapplied"
	}
	fmt.Fprintf(stdout, "%s to %d tenant(s) in %s: %s\n", done, p.Tenants, time.Since(start).Round(time.Millisecond), counts(p))
	return nil
}

func counts(p store.ReapplyProgress) string {
	return fmt.Sprintf("%d records seen, %d updated, %d deleted, %d unchanged, %d skipped",
		p.Seen, p.Updated, p.Deleted, p.Unchanged, p.Skipped)
}

// describeRetention prints the retention configuration for the operator.
func describeRetention(r config.Retention) string {
	d := func(v time.Duration) string {
		if v == 0 {
			return "forever"
		}
		return v.String()
	}
	s := "retention.terminal=" + d(r.Terminal)
	if len(r.ByType) > 0 {
		names := make([]string, 0, len(r.ByType))
		for t := range r.ByType {
			names = append(names, t)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, t := range names {
			parts[i] = t + "=" + d(r.ByType[t])
		}
		s += " retention.by_type{" + strings.Join(parts, ", ") + "}"
	}
	return s
}
