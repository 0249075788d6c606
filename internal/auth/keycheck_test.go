package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"hash/crc32"
	"net/netip"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
)

var testPollSecret = []byte("0123456789abcdef0123456789abcdef")

// crcKey gives body (the 63 characters before a check) the public CRC-32C
// check, as anyone can.
func crcKey(body string) string {
	sum := crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli))
	b := []byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)}
	return body + base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding).EncodeToString(b)
}

// TestIssuedKeysHaveAKeyedCheck: a key the service issues authenticates; its
// check is not the public CRC, and a key forged with the CRC over a made-up
// body costs no lookup once legacy keys are refused. Another secret gives
// other checks; auth.key_check_secret takes the place of the poll secret.
func TestIssuedKeysHaveAKeyedCheck(t *testing.T) {
	ctx := context.Background()
	keys := &memKeys{m: map[string]domain.APIKey{}}
	a := auth.NewWithOptions(keys, auth.Options{PollSecret: testPollSecret, CacheTTL: time.Hour})
	plain, k, err := a.NewKey("acme", domain.ScopeRead, "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_ = keys.SaveKey(ctx, k)
	if len(plain) != 70 || crcKey(plain[:63]) == plain {
		t.Fatalf("issued key %q: want 70 characters and a check other than the CRC", plain)
	}
	if p, err := a.APIKey(ctx, plain); err != nil || p.KeyID != k.ID {
		t.Fatalf("issued key: %+v %v", p, err)
	}
	// the same key under another secret fails its check, unseen
	other := auth.NewWithOptions(keys, auth.Options{PollSecret: []byte("another secret, 32 bytes long..."), CacheTTL: time.Hour})
	before := keys.lookups
	if _, err := other.APIKey(ctx, plain); domain.ErrorCode(err) != domain.Unauthenticated || keys.lookups != before {
		t.Fatalf("a key under another secret: %v, %d lookups", err, keys.lookups-before)
	}
	// rotation: the old secret as key_check_secret keeps the key's check
	rotated := auth.NewWithOptions(keys, auth.Options{PollSecret: []byte("another secret, 32 bytes long..."),
		KeyCheckSecret: testPollSecret, CacheTTL: time.Hour})
	if _, err := rotated.APIKey(ctx, plain); err != nil {
		t.Fatalf("key after rotating the poll secret with key_check_secret: %v", err)
	}
	// the operator key too
	op, ok, _ := a.NewOperatorKey("ops", time.Now())
	_ = keys.SaveKey(ctx, ok)
	if _, err := a.ConsoleKey(ctx, op); err != nil || crcKey(op[:63]) == op {
		t.Fatalf("operator key %q: %v", op, err)
	}
}

// TestLegacyKeys: keys without the keyed check (a CRC check, or the
// 63-character shape) authenticate while accepted, and are refused without a
// lookup when auth.accept_legacy_keys is false; forged ones cost a lookup
// each only while accepted.
func TestLegacyKeys(t *testing.T) {
	ctx := context.Background()
	keys := &memKeys{m: map[string]domain.APIKey{}}
	crc, ck, _ := auth.NewKey("acme", domain.ScopeRead, "crc", time.Now())
	short, sk, _ := auth.NewKey("acme", domain.ScopeRead, "short", time.Now())
	short = short[:63]
	sk.Digest = sha256.Sum256([]byte(short))
	_ = keys.SaveKey(ctx, ck)
	_ = keys.SaveKey(ctx, sk)
	forged := crcKey("ask_" + "abcdefghijklmnop" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")

	accept := auth.NewWithOptions(keys, auth.Options{PollSecret: testPollSecret})
	for _, k := range []string{crc, short} {
		if _, err := accept.APIKey(ctx, k); err != nil {
			t.Fatalf("legacy key %q accepted by default: %v", k, err)
		}
	}
	before := keys.lookups
	if _, err := accept.APIKey(ctx, forged); domain.ErrorCode(err) != domain.Unauthenticated || keys.lookups != before+1 {
		t.Fatalf("forged CRC key while legacy keys are accepted: %v, %d lookups (want 1)", err, keys.lookups-before)
	}

	refuse := auth.NewWithOptions(keys, auth.Options{PollSecret: testPollSecret, RefuseLegacyKeys: true})
	before = keys.lookups
	for _, k := range []string{crc, short, forged, forged[:63]} {
		if _, err := refuse.APIKey(ctx, k); domain.ErrorCode(err) != domain.Unauthenticated {
			t.Fatalf("legacy key %q with legacy keys refused: %v", k, err)
		}
	}
	if keys.lookups != before {
		t.Fatalf("refused legacy keys cost %d lookups", keys.lookups-before)
	}
	// a current key still works
	plain, k, _ := refuse.NewKey("acme", domain.ScopeRead, "new", time.Now())
	_ = keys.SaveKey(ctx, k)
	if _, err := refuse.APIKey(ctx, plain); err != nil {
		t.Fatalf("current key with legacy keys refused: %v", err)
	}
}

// TestUnknownKeysThrottledPerSource: a source sending keys that pass their
// check but are unknown gets a burst of lookups, then about one a second;
// another source, and a known key from the flooding one once cached, are
// not affected.
func TestUnknownKeysThrottledPerSource(t *testing.T) {
	ctx := context.Background()
	keys := &memKeys{m: map[string]domain.APIKey{}}
	now := time.Unix(1_800_000_000, 0)
	a := auth.NewWithOptions(keys, auth.Options{PollSecret: testPollSecret, CacheTTL: time.Hour, Now: func() time.Time { return now }})
	good, gk, _ := a.NewKey("acme", domain.ScopeRead, "good", now)
	_ = keys.SaveKey(ctx, gk)
	flooder := netip.MustParseAddr("192.0.2.7")
	if _, err := a.APIKeyFrom(ctx, good, flooder); err != nil { // cached from now on
		t.Fatal(err)
	}
	forge := func() string {
		k, _, _ := auth.NewKey("acme", domain.ScopeRead, "x", now) // a valid CRC, unknown id
		return k
	}
	before := keys.lookups
	for range 1000 {
		if _, err := a.APIKeyFrom(ctx, forge(), flooder); domain.ErrorCode(err) != domain.Unauthenticated {
			t.Fatalf("forged key: %v", err)
		}
	}
	if n := keys.lookups - before; n != 20 {
		t.Fatalf("1,000 forged keys from one source cost %d lookups, want the burst of 20", n)
	}
	if _, err := a.APIKeyFrom(ctx, good, flooder); err != nil {
		t.Fatalf("a cached key from the flooding source: %v", err)
	}
	// another source, and an IPv6 client counted by its /64
	before = keys.lookups
	_, _ = a.APIKeyFrom(ctx, forge(), netip.MustParseAddr("198.51.100.1"))
	if keys.lookups != before+1 {
		t.Fatal("another source's unknown key was not looked up")
	}
	v6 := netip.MustParseAddr("2001:db8:1:2::1")
	for i := range 30 {
		src := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, byte(i)})
		_, _ = a.APIKeyFrom(ctx, forge(), src)
	}
	before = keys.lookups
	_, _ = a.APIKeyFrom(ctx, forge(), v6)
	if keys.lookups != before {
		t.Fatal("a /64 walking its addresses earned new budget")
	}
	// the budget refills: one lookup a second
	now = now.Add(3 * time.Second)
	before = keys.lookups
	for range 10 {
		_, _ = a.APIKeyFrom(ctx, forge(), flooder)
	}
	if n := keys.lookups - before; n != 3 {
		t.Fatalf("3 s later, %d lookups, want 3", n)
	}
}
