package testenv

import (
	"context"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// KeySaver is where a test's API keys go: the store, or a fake of it.
type KeySaver interface {
	SaveKey(ctx context.Context, k domain.APIKey) error
}

// TestKey describes an API key a test needs; Name also names it in the result
// of SaveKeys.
type TestKey struct {
	Name, Tenant string
	Scopes       domain.Scopes
}

// SaveKeys makes each key with auth.NewKey (created at now; the legacy, unkeyed
// check, which every authenticator accepts while auth.accept_legacy_keys, its
// default), saves it in ks and returns the plain keys by name.
func SaveKeys(ctx context.Context, ks KeySaver, now time.Time, keys ...TestKey) (map[string]string, error) {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		plain, key, err := auth.NewKey(k.Tenant, k.Scopes, k.Name, now)
		if err != nil {
			return nil, err
		}
		if err := ks.SaveKey(ctx, key); err != nil {
			return nil, err
		}
		out[k.Name] = plain
	}
	return out, nil
}
