package store

import "context"

// ArmChangeLogs turns tenant's change logs on, as a watch's start does, for
// benchmarks that measure writes while a tenant is watched.
func ArmChangeLogs(ctx context.Context, s *Store, tenant string) error {
	_, _, err := s.armChangeLogs(ctx, s.tenantTags(tenant), nil, counters{}, nil)
	return err
}
