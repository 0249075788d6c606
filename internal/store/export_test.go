package store

import "github.com/asyncstatus/asyncstatus/internal/domain"

// IDTag is the hash tag of the shard that holds request id of tenant, for
// tests that look at raw keys.
func IDTag(s *Store, tenant, id string) string { return s.idTag(tenant, id) }

// TenantTags are the hash tags of tenant's shards.
func TenantTags(s *Store, tenant string) []string { return s.tenantTags(tenant) }

// CreateShard is the shard a create with Idempotency-Key key goes to.
func CreateShard(s *Store, key string) int {
	return s.newShard(idemDigest("create", "", domain.IdempotencyKey(key)))
}
