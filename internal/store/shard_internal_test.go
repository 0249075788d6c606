package store

import (
	"testing"

	"github.com/google/uuid"
)

// markedID is a new id marked with shard s.
func markedID(tb testing.TB, s int) string {
	tb.Helper()
	u, err := uuid.NewV7()
	if err != nil {
		tb.Fatal(err)
	}
	markID(&u, s)
	return u.String()
}

// An id keeps its version and variant (docs/reference.md §4: UUID version 7), names its
// shard, and an unmarked id is shard 0 unless it passes the check by chance.
func TestIDCarriesItsShard(t *testing.T) {
	for s := range MaxTenantShards {
		id := markedID(t, s)
		u := uuid.MustParse(id)
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 || !validID(id) {
			t.Fatalf("shard %d: id %s is not a UUIDv7", s, id)
		}
		if got, ok := idShard(id); !ok || got != s {
			t.Fatalf("shard %d: id %s reads as shard %d (%v)", s, id, got, ok)
		}
	}
	passed := 0
	for range 100000 {
		u, _ := uuid.NewV7()
		if _, ok := idShard(u.String()); ok {
			passed++
		}
	}
	if passed > 2 { // expected 100000 / 2^24: almost always none
		t.Fatalf("%d of 100000 unmarked ids pass the shard check", passed)
	}
	if s, ok := idShard("01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a"); ok || s != 0 {
		t.Fatalf("a legacy id reads as shard %d", s)
	}
}

// Shard 0 is the tag every key had before shards; the others are distinct,
// of the tenant's own (':' is not in tenant names), and do not depend on S:
// the first S shards of a power of two S sit in evenly spaced windows.
func TestShardTags(t *testing.T) {
	tags := &shardTags{}
	for _, tenant := range []string{"acme", "a", "bank-statements_7"} {
		if got := tags.tag(tenant, 0); got != "{"+tenant+"}" {
			t.Fatalf("shard 0 of %s is %s", tenant, got)
		}
		seen := map[string]bool{}
		base := keySlot(tenant)
		for s := range 16 {
			tag := tags.tag(tenant, s)
			if seen[tag] {
				t.Fatalf("%s: tag %s twice", tenant, tag)
			}
			seen[tag] = true
			if tag != findShardTag(tenant, s) {
				t.Fatalf("%s shard %d: cached %s, found %s", tenant, s, tag, findShardTag(tenant, s))
			}
			// the window of shard s among 16: offset s' (bit-reversed) x 1024 slots
			off := (keySlot(string(shardName(tag))) - base + clusterSlots) % clusterSlots
			if want := int(reverse4(s)) * (clusterSlots / 16); off < want || off >= want+shardWindow {
				t.Fatalf("%s shard %d: tag %s at offset %d, want [%d,%d)", tenant, s, tag, off, want, want+shardWindow)
			}
			if tenantOf(shardName(tag)) != tenant {
				t.Fatalf("tag %s is not %s's", tag, tenant)
			}
		}
	}
}

func reverse4(s int) int { return (s&1)<<3 | (s&2)<<1 | (s&4)>>1 | (s&8)>>3 }
