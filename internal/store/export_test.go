package store

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// What only the store's external tests need of its insides.

// ExpireQueued is the sweeper's queued timeout of one request (expireQueued).
func (s *Store) ExpireQueued(ctx context.Context, tenant, id string) (done bool, err error) {
	done, _, err = s.expireQueued(ctx, tenant, id)
	return done, err
}

// Client is the store's Redis client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Prefix is the key prefix.
func (s *Store) Prefix() string { return s.k.prefix }
