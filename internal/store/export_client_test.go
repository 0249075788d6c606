package store

import "github.com/redis/go-redis/v9"

// What only the store's external tests need of its insides.

// Client is the store's Redis client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Prefix is the key prefix.
func (s *Store) Prefix() string { return s.k.prefix }
