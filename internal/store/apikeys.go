package store

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// SaveKey stores an API key description (never its secret: only the digest).
func (s *Store) SaveKey(ctx context.Context, k domain.APIKey) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	if k.Operator {
		return s.saveOperatorKey(ctx, k)
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.k.apiKey(k.ID), "t", k.Tenant, "s", strconv.Itoa(int(k.Scopes)), "d", string(k.Digest[:]),
			"n", k.Name, "c", strconv.FormatInt(k.CreatedAt.UnixMilli(), 10))
		p.SAdd(ctx, s.k.tenantKeys(k.Tenant), k.ID)
		p.SAdd(ctx, s.k.tenants(), k.Tenant)
		return nil
	})
	if err != nil {
		return backend("save key "+k.ID, err)
	}
	return nil
}

// LookupKey finds an API key by its public id; NotFound when there is none.
func (s *Store) LookupKey(ctx context.Context, id string) (domain.APIKey, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	m, err := s.rdb.HGetAll(ctx, s.k.apiKey(id)).Result()
	if err != nil {
		return domain.APIKey{}, backend("look up key", err)
	}
	if len(m) == 0 || len(m["d"]) != 32 {
		return domain.APIKey{}, domain.Errorf(domain.NotFound, "no such key")
	}
	sc, _ := strconv.Atoi(m["s"])
	c, _ := strconv.ParseInt(m["c"], 10, 64)
	k := domain.APIKey{ID: id, Tenant: m["t"], Scopes: domain.Scopes(sc), Name: m["n"], CreatedAt: time.UnixMilli(c).UTC(),
		Operator: m["o"] == "1"}
	copy(k.Digest[:], m["d"])
	return k, nil
}

// ListKeys lists a tenant's API keys, by id.
func (s *Store) ListKeys(ctx context.Context, tenant string) ([]domain.APIKey, error) {
	return s.listKeySet(ctx, s.k.tenantKeys(tenant))
}

func (s *Store) listKeySet(ctx context.Context, set string) ([]domain.APIKey, error) {
	cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	ids, err := s.rdb.SMembers(cctx, set).Result()
	cancel()
	if err != nil {
		return nil, backend("list keys", err)
	}
	sort.Strings(ids)
	out := make([]domain.APIKey, 0, len(ids))
	for _, id := range ids {
		k, err := s.LookupKey(ctx, id)
		if domain.ErrorCode(err) == domain.NotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// RevokeKey deletes an API key. Processes that cached it stop accepting it within
// their cache TTL (auth.key_cache_ttl).
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	k, err := s.LookupKey(ctx, id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	// The key record goes first: from then on the key is refused; the tenant's list
	// is only for listing.
	if err := s.rdb.Del(ctx, s.k.apiKey(id)).Err(); err != nil {
		return backend("revoke key", err)
	}
	set := s.k.tenantKeys(k.Tenant)
	if k.Operator {
		set = s.k.operatorKeys()
	}
	if err := s.rdb.SRem(ctx, set, id).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return backend("revoke key", err)
	}
	return nil
}

// saveOperatorKey stores an operator key (docs/reference.md §14): no tenant, "o" = "1", listed
// in the operator key set. Two single-key commands, each on its own slot.
func (s *Store) saveOperatorKey(ctx context.Context, k domain.APIKey) error {
	if err := s.rdb.HSet(ctx, s.k.apiKey(k.ID), "t", "", "s", "0", "d", string(k.Digest[:]), "n", k.Name,
		"c", strconv.FormatInt(k.CreatedAt.UnixMilli(), 10), "o", "1").Err(); err != nil {
		return backend("save operator key "+k.ID, err)
	}
	if err := s.rdb.SAdd(ctx, s.k.operatorKeys(), k.ID).Err(); err != nil {
		return backend("save operator key "+k.ID, err)
	}
	return nil
}

// ListOperatorKeys lists the operator keys, by id.
func (s *Store) ListOperatorKeys(ctx context.Context) ([]domain.APIKey, error) {
	return s.listKeySet(ctx, s.k.operatorKeys())
}
