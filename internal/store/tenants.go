package store

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Tenant-wide state: the registry of tenants and the frozen flag.

// registerTenant adds tenant to the registry of tenants the sweeper walks,
// once per process.
func (s *Store) registerTenant(ctx context.Context, tenant string) {
	s.mu.Lock()
	known := s.knownTenant[tenant]
	s.mu.Unlock()
	if known {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	// Best effort: the next create retries, and the sweeper also learns tenants from
	// API keys. The registry is a plain set outside every tenant's slot.
	if err := s.rdb.SAdd(ctx, s.k.tenants(), tenant).Err(); err == nil {
		s.mu.Lock()
		s.knownTenant[tenant] = true
		s.mu.Unlock()
	}
}

// SetFrozen freezes or unfreezes a tenant (docs/reference.md §2). Every script reads the
// flag from its own shard's meta hash (no script touches two slots), so it is
// written to each of the tenant's S shards, in one pipeline; when SetFrozen
// returns nil every shard has it, so every later read is refused. On an error
// some shards may have it and others not: the caller retries.
func (s *Store) SetFrozen(ctx context.Context, tenant string, frozen bool) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, tag := range s.tenantTags(tenant) {
			if frozen {
				p.HSet(ctx, s.k.meta(tag), "fz", "1")
			} else {
				p.HDel(ctx, s.k.meta(tag), "fz")
			}
		}
		return nil
	})
	if err != nil {
		return backend("freeze tenant "+tenant, err)
	}
	return nil
}

// Frozen reports whether a tenant is frozen.
func (s *Store) Frozen(ctx context.Context, tenant string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	v, err := s.rdb.HGet(ctx, s.k.meta(s.tag(tenant, 0)), "fz").Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, backend("read tenant "+tenant, err)
	}
	return v == "1", nil
}
