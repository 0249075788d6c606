package store

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Tenants lists every tenant in the registry (those that created a request or
// were given a key), for the console's tenants page.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	return s.tenantList(ctx)
}

// TenantSummary counts a tenant's requests by status from its indexes (ZCARD
// of each status and type set; no record is read) and finds its oldest queued
// and processing requests, inside the tenant's slot. The meta hash names the
// types, and types never go, so the indexes of the types seen last time are
// asked in the same pipeline as the meta hash: one round trip, and a second
// one only for types that are new since.
func (s *Store) TenantSummary(ctx context.Context, tenant string) (domain.TenantSummary, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	known := s.knownTypes(tenant)
	// every shard's meta hash: each names the types made in its shard
	var metas []*redis.MapStringStringCmd
	probes, err := s.probeIndexes(ctx, tenant, known, func(p redis.Pipeliner) {
		metas = s.queueMetas(ctx, p, tenant)
	})
	if err != nil {
		return domain.TenantSummary{}, err
	}
	return s.summarise(ctx, tenant, known, metas, probes)
}

func (s *Store) knownTypes(tenant string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seenTypes[tenant]
}

func (s *Store) queueMetas(ctx context.Context, p redis.Pipeliner, tenant string) []*redis.MapStringStringCmd {
	metas := make([]*redis.MapStringStringCmd, s.opts.TenantShards)
	for i, tag := range s.tenantTags(tenant) {
		metas[i] = p.HGetAll(ctx, s.k.meta(tag))
	}
	return metas
}

// summarise makes the summary of tenant from its meta hashes and the probes of
// the known types, probing the types new since in a second round trip.
func (s *Store) summarise(ctx context.Context, tenant string, known []string, metas []*redis.MapStringStringCmd, probes []indexProbe) (domain.TenantSummary, error) {
	sum := domain.TenantSummary{Tenant: tenant, Counts: make(map[domain.Status]int64, len(domain.Statuses))}
	sum.Frozen = metas[0].Val()["fz"] == "1"
	var types, fresh []string
	for _, meta := range metas {
		for f := range meta.Val() {
			if t, ok := strings.CutPrefix(f, "t:"); ok && !slices.Contains(types, t) {
				types = append(types, t)
				if !slices.Contains(known, t) {
					fresh = append(fresh, t)
				}
			}
		}
	}
	if len(fresh) > 0 {
		more, err := s.probeIndexes(ctx, tenant, fresh, nil)
		if err != nil {
			return sum, err
		}
		probes = append(probes, more...)
		s.mu.Lock()
		s.seenTypes[tenant] = types
		s.mu.Unlock()
	}
	for _, pr := range probes {
		sum.Counts[pr.status] += pr.card.Val()
		if pr.oldest == nil || len(pr.oldest.Val()) == 0 {
			continue
		}
		at := time.UnixMilli(int64(pr.oldest.Val()[0].Score)).UTC()
		oldest := &sum.OldestQueued
		if pr.status == domain.StatusProcessing {
			oldest = &sum.OldestProcessing
		}
		if *oldest == nil || at.Before(**oldest) {
			*oldest = &at
		}
	}
	return sum, nil
}

// indexProbe is what TenantSummary asks of one status index.
type indexProbe struct {
	status domain.Status
	card   *redis.IntCmd
	oldest *redis.ZSliceCmd // non-terminal statuses only
}

// probeIndexes asks the indexes of types in every shard of tenant in one
// pipeline, with whatever more adds to it.
func (s *Store) probeIndexes(ctx context.Context, tenant string, types []string, more func(redis.Pipeliner)) ([]indexProbe, error) {
	var probes []indexProbe
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if more != nil {
			more(p)
		}
		probes = s.queueProbes(ctx, p, s.tenantTags(tenant), types, probes)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, backend("summarise tenant "+tenant, err)
	}
	return probes, nil
}

// queueProbes adds to p the probes of the indexes of types in the shards of
// tags, appending them to probes.
func (s *Store) queueProbes(ctx context.Context, p redis.Pipeliner, tags, types []string, probes []indexProbe) []indexProbe {
	for _, tag := range tags {
		for _, st := range domain.Statuses {
			for _, t := range types {
				pr := indexProbe{status: st, card: p.ZCard(ctx, s.k.index(tag, st, t))}
				if !st.Terminal() {
					pr.oldest = p.ZRangeWithScores(ctx, s.k.index(tag, st, t), 0, 0)
				}
				probes = append(probes, pr)
			}
		}
	}
	return probes
}

// Console sessions and one-time sign-in tokens (docs/reference.md §14) are kept under the
// SHA-256 digest of their secret only, outside every tenant slot, each in one
// key read and written by single-key commands.

// SaveConsoleSession stores a session under digest until it expires.
func (s *Store) SaveConsoleSession(ctx context.Context, digest string, sess domain.ConsoleSession) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	key := s.k.consoleSession(digest)
	op := "0"
	if sess.Operator {
		op = "1"
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "k", sess.KeyID, "t", sess.Tenant, "o", op, "e", strconv.FormatInt(sess.Expires.UnixMilli(), 10))
		p.PExpireAt(ctx, key, sess.Expires)
		return nil
	})
	if err != nil {
		return backend("save console session", err)
	}
	return nil
}

// ConsoleSession reads the session stored under digest; NotFound when there is
// none or it has expired (the record's own expiry is checked too, so that a TTL
// that has not fired yet changes nothing).
func (s *Store) ConsoleSession(ctx context.Context, digest string) (domain.ConsoleSession, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	return s.consoleSession(s.rdb.HGetAll(ctx, s.k.consoleSession(digest)))
}

// consoleSession reads a session from the reply of the HGETALL of its key.
func (s *Store) consoleSession(cmd *redis.MapStringStringCmd) (domain.ConsoleSession, error) {
	m, err := cmd.Result()
	if err != nil {
		return domain.ConsoleSession{}, backend("read console session", err)
	}
	e, _ := strconv.ParseInt(m["e"], 10, 64)
	sess := domain.ConsoleSession{KeyID: m["k"], Tenant: m["t"], Operator: m["o"] == "1", Expires: time.UnixMilli(e).UTC()}
	if sess.KeyID == "" || !s.now().Before(sess.Expires) {
		return domain.ConsoleSession{}, domain.ErrNotFound()
	}
	return sess, nil
}

// DeleteConsoleSession ends a session (sign-out).
func (s *Store) DeleteConsoleSession(ctx context.Context, digest string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	if err := s.rdb.Del(ctx, s.k.consoleSession(digest)).Err(); err != nil {
		return backend("delete console session", err)
	}
	return nil
}

// SaveSignInToken stores a one-time sign-in token for key id keyID.
func (s *Store) SaveSignInToken(ctx context.Context, digest, keyID string, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	if err := s.rdb.Set(ctx, s.k.consoleSignIn(digest), keyID, ttl).Err(); err != nil {
		return backend("save sign-in token", err)
	}
	return nil
}

// TakeSignInToken returns the key id of a one-time sign-in token and deletes
// it in the same command (GETDEL), so that it signs in once at most.
func (s *Store) TakeSignInToken(ctx context.Context, digest string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	id, err := s.rdb.GetDel(ctx, s.k.consoleSignIn(digest)).Result()
	if errors.Is(err, redis.Nil) {
		return "", domain.ErrNotFound()
	}
	if err != nil {
		return "", backend("take sign-in token", err)
	}
	return id, nil
}
