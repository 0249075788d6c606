package store

import (
	"context"
	"strings"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// ReapplyProgress counts what ReapplyRetention did so far.
type ReapplyProgress struct {
	// Tenant being worked on; Tenants the number started so far.
	Tenant  string
	Tenants int
	// Seen counts the terminal index entries read (a concurrent change can make
	// an entry be read twice; applying twice is harmless).
	Seen int64
	// Updated records got a new expires_at (or were made permanent), Deleted ones
	// were past the new retention and are gone, Unchanged already had it right,
	// Skipped were no longer there (removed by retention or delete meanwhile).
	Updated, Deleted, Unchanged, Skipped int64
}

// reapplyBatch is how many records one reapply.lua call handles: about 2 ms of
// Redis time, so that a reapply next to live traffic never holds Redis long.
const reapplyBatch = 100

// ReapplyOptions tune ReapplyRetention.
type ReapplyOptions struct {
	// Tenant limits the work to one tenant; "" means every registered tenant.
	Tenant string
	// DryRun counts what would change and changes nothing.
	DryRun bool
	// Progress, when not nil, is called after every batch of records and once at
	// the end of each tenant.
	Progress func(ReapplyProgress)
}

// ReapplyRetention applies the store's current retention options to every
// existing terminal record (docs/reference.md §6, `asyncstatus retention reapply`). Running
// it twice, or alongside serving replicas, is harmless: each record is updated
// in one script call that re-reads it.
func (s *Store) ReapplyRetention(ctx context.Context, o ReapplyOptions) (ReapplyProgress, error) {
	tenant, progress := o.Tenant, o.Progress
	var p ReapplyProgress
	report := func() {
		if progress != nil {
			progress(p)
		}
	}
	tenants := []string{tenant}
	if tenant == "" {
		var err error
		if tenants, err = s.tenantList(ctx); err != nil {
			return p, err
		}
	}
	for _, t := range tenants {
		p.Tenant = t
		p.Tenants++
		for _, tag := range s.tenantTags(t) {
			cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
			fields, err := s.rdb.HKeys(cctx, s.k.meta(tag)).Result()
			cancel()
			if err != nil {
				return p, backend("reapply retention: read types of "+t, err)
			}
			for _, f := range fields {
				typ, ok := strings.CutPrefix(f, "t:")
				if !ok {
					continue
				}
				for _, st := range domain.Statuses {
					if !st.Terminal() {
						continue
					}
					if err := s.reapplySet(ctx, tag, s.k.index(tag, st, typ), o.DryRun, &p, report); err != nil {
						return p, err
					}
				}
			}
		}
		report()
	}
	return p, nil
}

// tenantList reads the whole tenant registry.
func (s *Store) tenantList(ctx context.Context) ([]string, error) {
	return s.scanSet(ctx, s.k.tenants(), "list tenants")
}

// scanSet reads a whole set with SSCAN, each call under its own deadline, so
// that a large registry never blocks Redis with one SMEMBERS.
func (s *Store) scanSet(ctx context.Context, key, op string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		batch, next, err := s.rdb.SScan(cctx, key, cursor, "", 500).Result()
		cancel()
		if err != nil {
			return nil, backend(op, err)
		}
		out = append(out, batch...)
		if next == 0 {
			return out, nil
		}
		cursor = next
	}
}

// reapplySet walks one terminal index with ZSCAN, which returns every entry
// present for the whole walk at least once, however the set changes meanwhile.
func (s *Store) reapplySet(ctx context.Context, tag, set string, dry bool, p *ReapplyProgress, report func()) error {
	var cursor uint64
	for {
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		kv, next, err := s.rdb.ZScan(cctx, set, cursor, "", 2*reapplyBatch).Result()
		cancel()
		if err != nil {
			return backend("reapply retention: scan "+set, err)
		}
		ids := make([]string, 0, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			if validID(kv[i]) {
				ids = append(ids, kv[i])
			}
		}
		p.Seen += int64(len(ids))
		for len(ids) > 0 {
			n := min(len(ids), reapplyBatch)
			if err := s.reapplyRecords(ctx, tag, ids[:n], dry, p); err != nil {
				return err
			}
			ids = ids[n:]
		}
		report()
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// reapplyRecords applies retention to records of the shard of tag in one
// script call.
func (s *Store) reapplyRecords(ctx context.Context, tag string, ids []string, dry bool, p *ReapplyProgress) error {
	keys := []string{s.k.retentionBuckets(tag)}
	dryArg := "0"
	if dry {
		dryArg = "1"
	}
	args := []any{ms(s.now()), dryArg, s.k.retentionBucketPrefix(tag), s.k.indexPrefix(tag)}
	for _, id := range ids {
		ca, ok := idMillis(id)
		if !ok {
			p.Skipped++
			continue
		}
		keys = append(keys, s.k.record(tag, id))
		args = append(args, id, ca)
	}
	if len(keys) == 1 {
		return nil
	}
	r, err := s.run(ctx, s.sc.reapply, scriptCall{keys: keys, args: args})
	if err != nil {
		return backend("reapply retention", err)
	}
	if r.code != codeOK || len(r.rest) < 4 {
		return unexpected("reapply retention", r)
	}
	for i, dst := range []*int64{&p.Updated, &p.Deleted, &p.Unchanged, &p.Skipped} {
		n, _ := r.rest[i].(int64)
		*dst += n
	}
	return nil
}
