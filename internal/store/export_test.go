package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// IDTag is the hash tag of the shard that holds request id of tenant, for
// tests that look at raw keys.
func IDTag(s *Store, tenant, id string) string { return s.idTag(tenant, id) }

// TenantTags are the hash tags of tenant's shards.
func TenantTags(s *Store, tenant string) []string { return s.tenantTags(tenant) }

// CreateShard is the shard a create with Idempotency-Key key goes to.
func CreateShard(s *Store, key string) int {
	return s.newShard(context.Background(), "t", idemDigest("create", "", domain.IdempotencyKey(key)))
}

// Remark is id with its last four bytes made the mark of shard (its time and
// first random bytes kept): an id whose mark names shard by chance.
func Remark(id string, shard int) string {
	u := uuid.MustParse(id)
	markID(&u, shard)
	return u.String()
}

// StaleShardGroups makes s group the shards of its listings as groups says,
// as a slot map gone stale would.
func StaleShardGroups(s *Store, groups func(shards int) [][]int) { s.staleGroups = groups }

// ShardOf is the shard id names.
func ShardOf(id string) int { return shardOf(id) }

// ExpireQueued (for tests) expires a request still queued past its queued timeout (counted
// from created_at, with the timeout configured now). done is false when there
// was nothing to do (it moved on, is not due, or is gone).
func (s *Store) ExpireQueued(ctx context.Context, tenant, id string) (done bool, err error) {
	done, _, err = s.expireQueued(ctx, "", tenant, id)
	return done, err
}

// TimeOutProcessing (for tests) fails a processing request whose heartbeat stopped.
func (s *Store) TimeOutProcessing(ctx context.Context, tenant, id string) (done bool, err error) {
	done, err = s.timeOutProcessing(ctx, "", tenant, id)
	return done, err
}
