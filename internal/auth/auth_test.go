package auth_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
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

// TestPollToken: the token is "<tenant>.<base64url HMAC-SHA256(secret,
// "poll-token\x00"+tenant+"\x00"+id)>", it grants exactly its request, and
// concurrent use of the pooled MAC states gives the same tokens.
func TestPollToken(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	a := auth.New(&memKeys{m: map[string]domain.APIKey{}}, secret, time.Hour, nil)
	want := func(tenant, id string) string {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte("poll-token\x00" + tenant + "\x00" + id))
		return tenant + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				tenant, id := fmt.Sprintf("t%d", g), fmt.Sprintf("01936f7e-%04d", i)
				tok := a.PollToken(tenant, id)
				if tok != want(tenant, id) {
					t.Errorf("PollToken(%s, %s) = %s, want %s", tenant, id, tok, want(tenant, id))
					return
				}
				p, err := a.PollTokenPrincipal(tok, id)
				if err != nil || p.Tenant != tenant || p.PollTokenFor != id || p.Scopes != domain.ScopeRead || p.KeyID != "" {
					t.Errorf("PollTokenPrincipal(%s): %+v %v", tok, p, err)
					return
				}
			}
		})
	}
	wg.Wait()
	tok := a.PollToken("acme", "id1")
	for _, bad := range []struct{ tok, id string }{
		{tok, "id2"}, {tok + "A", "id1"}, {tok[:len(tok)-1], "id1"}, {"globex" + tok[4:], "id1"},
		{"acme." + strings.Repeat("A", 43), "id1"}, {"acme.!" + tok[6:], "id1"}, {"acme", "id1"}, {"", "id1"}, {"ACME" + tok[4:], "id1"},
	} {
		if _, err := a.PollTokenPrincipal(bad.tok, bad.id); domain.ErrorCode(err) != domain.NotFound {
			t.Errorf("PollTokenPrincipal(%q, %q): %v", bad.tok, bad.id, err)
		}
	}
}

// TestKeyCheckCostsNoLookup: a key whose check characters do not match its body
// is refused without a store lookup, however plausible the rest; keys of the
// legacy shape (no check, made before the check existed) still authenticate.
func TestKeyCheckCostsNoLookup(t *testing.T) {
	ctx := context.Background()
	keys := &memKeys{m: map[string]domain.APIKey{}}
	plain, k, err := auth.NewKey("acme", domain.ScopeRead, "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != 70 || !strings.HasPrefix(plain, "ask_") {
		t.Fatalf("key %q: want ask_ and 66 more characters", plain)
	}
	_ = keys.SaveKey(ctx, k)
	a := auth.New(keys, []byte("secret"), time.Hour, nil)
	if _, err := a.APIKey(ctx, plain); err != nil {
		t.Fatalf("valid key: %v", err)
	}
	lookups := keys.lookups
	// Every single-character change of the check, and of the secret, fails the check.
	for i := len(plain) - 50; i < len(plain); i++ {
		for _, c := range "a7A-" {
			if byte(c) == plain[i] {
				continue
			}
			bad := plain[:i] + string(c) + plain[i+1:]
			if _, err := a.APIKey(ctx, bad); domain.ErrorCode(err) != domain.Unauthenticated {
				t.Fatalf("%q: %v", bad, err)
			}
		}
	}
	// A made-up key with a fresh id: no lookup either.
	fresh, _, _ := auth.NewKey("acme", domain.ScopeRead, "t", time.Now())
	madeUp := fresh[:len(fresh)-1] + string("ab"[map[bool]int{true: 1}[fresh[len(fresh)-1] == 'a']])
	if _, err := a.APIKey(ctx, madeUp); domain.ErrorCode(err) != domain.Unauthenticated {
		t.Fatalf("made-up key: %v", err)
	}
	if keys.lookups != lookups {
		t.Fatalf("keys failing their check cost %d lookups", keys.lookups-lookups)
	}
	// A genuine-looking unknown key (right check) is looked up once, then its
	// absence is cached.
	if _, err := a.APIKey(ctx, fresh); domain.ErrorCode(err) != domain.Unauthenticated {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := a.APIKey(ctx, fresh); domain.ErrorCode(err) != domain.Unauthenticated {
		t.Fatalf("unknown key again: %v", err)
	}
	if keys.lookups != lookups+1 {
		t.Fatalf("an unknown key twice cost %d lookups, want 1", keys.lookups-lookups)
	}

	// Legacy shape: the 63 characters before the check, stored with their own digest.
	legacy, lk, _ := auth.NewKey("globex", domain.ScopeRead, "old", time.Now())
	legacy = legacy[:63]
	lk.Digest = sha256.Sum256([]byte(legacy))
	_ = keys.SaveKey(ctx, lk)
	if p, err := a.APIKey(ctx, legacy); err != nil || p.Tenant != "globex" || p.KeyID != lk.ID {
		t.Fatalf("legacy key: %+v %v", p, err)
	}
	if _, err := a.APIKey(ctx, legacy[:62]+"x"); domain.ErrorCode(err) != domain.Unauthenticated {
		t.Fatalf("legacy key with a wrong secret: %v", err)
	}
}

// TestKeyCacheEvictsOne: when the cache of misses is full, a new miss evicts
// one entry, not all: the real keys cached meanwhile keep answering from the
// cache.
func TestKeyCacheEvictsOne(t *testing.T) {
	ctx := context.Background()
	keys := &memKeys{m: map[string]domain.APIKey{}}
	var real []string
	for i := 0; i < 50; i++ {
		plain, k, err := auth.NewKey("acme", domain.ScopeRead, "t", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		_ = keys.SaveKey(ctx, k)
		real = append(real, plain)
	}
	a := auth.New(keys, []byte("secret"), time.Hour, nil)
	for _, p := range real {
		if _, err := a.APIKey(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// More distinct unknown (but well-formed) keys than both caches hold
	// (100,000 keys and 10,000 misses).
	var last string
	for i := 0; i < 101_000; i++ {
		last, _, _ = auth.NewKey("acme", domain.ScopeRead, "t", time.Now())
		_, _ = a.APIKey(ctx, last)
	}
	before := keys.lookups
	if _, err := a.APIKey(ctx, last); domain.ErrorCode(err) != domain.Unauthenticated || keys.lookups != before {
		t.Fatalf("the latest miss was not cached: %v, %d lookups", err, keys.lookups-before)
	}
	for _, p := range real {
		if _, err := a.APIKey(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if n := keys.lookups - before; n != 0 {
		t.Fatalf("after a flood of unknown keys, %d of %d real keys were looked up again", n, len(real))
	}
}

// TestKeyCheckIsCRC32C: the legacy check (auth.NewKey, as keys were issued
// before the keyed one) is the CRC-32C of the 63 characters before it, in
// the id's base32 alphabet (docs/design.md), and a cached key costs no
// allocation.
func TestKeyCheckIsCRC32C(t *testing.T) {
	plain, _, err := auth.NewKey("acme", domain.ScopeRead, "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sum := crc32.Checksum([]byte(plain[:63]), crc32.MakeTable(crc32.Castagnoli))
	b := []byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)}
	want := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding).EncodeToString(b)
	if plain[63:] != want {
		t.Fatalf("check %q, want %q", plain[63:], want)
	}
	keys := &memKeys{m: map[string]domain.APIKey{}}
	plain, k, _ := auth.NewKey("acme", domain.ScopeRead, "t", time.Now())
	_ = keys.SaveKey(context.Background(), k)
	a := auth.New(keys, []byte("secret"), time.Hour, nil)
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { _, _ = a.APIKey(ctx, plain) }); n != 0 {
		t.Fatalf("a cached key costs %v allocations", n)
	}
}

// TestOperatorKey: an operator key is refused by the public API (401, like an
// unknown key) and accepted by the console, as a tenant admin key is; a key
// without admin is refused by the console. KeyByID sees a revocation once the
// cache entry ages out.
func TestOperatorKey(t *testing.T) {
	ctx := context.Background()
	keys := &memKeys{m: map[string]domain.APIKey{}}
	now := time.Now()
	clock := func() time.Time { return now }
	a := auth.New(keys, []byte("secret"), 10*time.Second, clock)
	op, ok, _ := auth.NewOperatorKey("ops", now)
	if !ok.Operator || ok.Tenant != "" || ok.Scopes != 0 {
		t.Fatalf("operator key description: %+v", ok)
	}
	admin, ak, _ := auth.NewKey("acme", domain.ScopeRead|domain.ScopeAdmin, "a", now)
	reader, rk, _ := auth.NewKey("acme", domain.ScopeRead|domain.ScopeWrite, "r", now)
	for _, k := range []domain.APIKey{ok, ak, rk} {
		_ = keys.SaveKey(ctx, k)
	}
	if _, err := a.APIKey(ctx, op); domain.ErrorCode(err) != domain.Unauthenticated {
		t.Fatalf("public API with an operator key: %v, want UNAUTHENTICATED", err)
	}
	if k, err := a.ConsoleKey(ctx, op); err != nil || !k.Operator {
		t.Fatalf("console with an operator key: %+v %v", k, err)
	}
	if k, err := a.ConsoleKey(ctx, admin); err != nil || k.Tenant != "acme" {
		t.Fatalf("console with an admin key: %+v %v", k, err)
	}
	if _, err := a.ConsoleKey(ctx, reader); domain.ErrorCode(err) != domain.Unauthenticated {
		t.Fatalf("console with a read,write key: %v, want UNAUTHENTICATED", err)
	}
	if _, err := a.ConsoleKey(ctx, op[:len(op)-1]+"A"); domain.ErrorCode(err) != domain.Unauthenticated {
		t.Fatalf("console with a wrong secret: %v", err)
	}
	delete(keys.m, ok.ID)
	if _, found, _ := a.KeyByID(ctx, ok.ID); !found {
		t.Fatal("KeyByID must trust its cache for the TTL")
	}
	now = now.Add(11 * time.Second)
	if _, found, err := a.KeyByID(ctx, ok.ID); found || err != nil {
		t.Fatalf("KeyByID after revocation and TTL: found=%v err=%v", found, err)
	}
	if _, found, _ := a.KeyByID(ctx, "nonsense"); found {
		t.Fatal("KeyByID of a malformed id")
	}
}

// TestPollTokenCanonicalOnly: the last character of a token's MAC carries two
// spare bits; the three spellings with other values there are not the token.
func TestPollTokenCanonicalOnly(t *testing.T) {
	a := auth.New(&memKeys{m: map[string]domain.APIKey{}}, []byte("secret"), time.Hour, nil)
	tok := a.PollToken("acme", "req_1")
	if _, err := a.PollTokenPrincipal(tok, "req_1"); err != nil {
		t.Fatalf("canonical token refused: %v", err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	for spare := 1; spare < 4; spare++ {
		other := tok[:len(tok)-1] + string(alphabet[last|spare])
		if _, err := a.PollTokenPrincipal(other, "req_1"); domain.ErrorCode(err) != domain.NotFound {
			t.Errorf("spelling %q with spare bits %d: %v, want NOT_FOUND", other, spare, err)
		}
	}
}
