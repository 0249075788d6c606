package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

type memKeys struct {
	m       map[string]domain.APIKey
	lookups int
}

func (k *memKeys) LookupKey(_ context.Context, id string) (domain.APIKey, error) {
	k.lookups++
	if v, ok := k.m[id]; ok {
		return v, nil
	}
	return domain.APIKey{}, domain.ErrNotFound()
}

func (k *memKeys) SaveKey(_ context.Context, v domain.APIKey) error { k.m[v.ID] = v; return nil }

// TestAPIKey: a valid key authenticates (from the cache the second time, even
// when the first call's string lived in a buffer since reused); a wrong secret,
// a malformed id or an unknown key do not.
func TestAPIKey(t *testing.T) {
	ctx := context.Background()
	keys := &memKeys{m: map[string]domain.APIKey{}}
	plain, k, err := auth.NewKey("acme", domain.ScopeRead, "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_ = keys.SaveKey(ctx, k)
	a := auth.New(keys, []byte("secret"), time.Hour, nil)

	buf := []byte(plain)
	p, err := a.APIKey(ctx, string(buf))
	if err != nil || p.Tenant != "acme" || p.KeyID != k.ID || p.Scopes != domain.ScopeRead {
		t.Fatalf("valid key: %+v %v", p, err)
	}
	for i := range buf { // the header buffer is reused by the next request
		buf[i] = 'x'
	}
	if p, err := a.APIKey(ctx, plain); err != nil || p.KeyID != k.ID || keys.lookups != 1 {
		t.Fatalf("cached key: %+v %v, %d lookups", p, err, keys.lookups)
	}

	wrongSecret := plain[:len(plain)-1] + string("AB"[map[bool]int{true: 1}[plain[len(plain)-1] == 'A']])
	bad := []string{
		wrongSecret,
		"",
		plain[:len(plain)-1],
		"ask_" + "ABCDEFGHIJKLMNOP" + plain[4+16:], // upper case id
		"ask_" + "aaaaaaaaaaaaaaa1" + plain[4+16:], // 1 is not base32
		"ask_" + "aaaaaaaaaaaaaaaa" + plain[4+16:], // unknown id
		"xsk_" + plain[4:],
	}
	for _, b := range bad {
		if _, err := a.APIKey(ctx, b); domain.ErrorCode(err) != domain.Unauthenticated {
			t.Errorf("%q: %v", b, err)
		}
	}
}
