package store

import (
	"context"
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Tenant shards (docs/design.md, Tenant shards). A tenant's request keys are
// spread over S hash tags, its shards: shard 0 is "{<tenant>}", the tag every
// key had before shards existed, so that data written then is shard 0 data and
// S = 1 spells every key as it always did; shard s > 0 is "{<tenant>:<n>}"
// (':' cannot occur in a tenant name, so no tag of one tenant is another
// tenant's). A request's shard is written in its id (markID), so that a poll
// names its keys from the id alone.

// MaxTenantShards is the largest redis.tenant_shards: a shard index is one
// byte of the id.
const MaxTenantShards = 256

// shardWindow is the width, in cluster slots, of the window a shard's tag is
// placed in (clusterSlots / MaxTenantShards).
const shardWindow = clusterSlots / MaxTenantShards

// shardTags finds and remembers the hash tags of each tenant's shards. Where a
// tag lands does not depend on S: shard s's tag hashes into the window that
// starts bitrev8(s) windows after shard 0's slot, so the first S shards of any
// power of two S sit evenly spaced around the slot ring, and raising S adds
// tags without moving any. Masters own contiguous slot ranges, so evenly
// spaced tags spread over every master.
type shardTags struct {
	mu sync.Mutex
	m  map[string][]string // tenant -> tags of shards 0..len-1 found so far
	// keys are the tagKeys of the tags the writes have named (keysOf).
	keys map[string]*tagKeys
}

// shardTagCap bounds the tenants remembered: tenant names come from API keys,
// so they are few, but a name is not trusted to be; past the cap the table is
// started again (finding one tenant's 16 tags costs about 0.1 ms).
const shardTagCap = 4096

// tag is the hash tag of tenant's shard s (0 <= s < MaxTenantShards).
func (t *shardTags) tag(tenant string, s int) string {
	if s == 0 {
		return "{" + tenant + "}"
	}
	t.mu.Lock()
	have := t.m[tenant]
	if s < len(have) {
		tag := have[s]
		t.mu.Unlock()
		return tag
	}
	t.mu.Unlock()
	tags := make([]string, s+1)
	copy(tags, have)
	for i := len(have); i <= s; i++ {
		tags[i] = findShardTag(tenant, i)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= shardTagCap {
		t.m = map[string][]string{}
	}
	if cur := t.m[tenant]; len(cur) < len(tags) {
		t.m[tenant] = tags
	}
	return tags[s]
}

// keysOf is tag's tagKeys, spelled by k the first time and then
// remembered; past shardTagCap tags the table is started again, as m is.
func (t *shardTags) keysOf(k keys, tag string) *tagKeys {
	t.mu.Lock()
	tk := t.keys[tag]
	t.mu.Unlock()
	if tk != nil {
		return tk
	}
	tk = k.forTag(tag)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keys == nil || len(t.keys) >= shardTagCap {
		t.keys = map[string]*tagKeys{}
	}
	t.keys[tag] = tk
	return tk
}

// findShardTag is the tag of tenant's shard s: "{<tenant>:<n>}" for the
// smallest n whose slot falls in the shard's window (about 256 CRCs).
func findShardTag(tenant string, s int) string {
	if s == 0 {
		return "{" + tenant + "}"
	}
	start := (keySlot(tenant) + int(bits.Reverse8(uint8(s)))*shardWindow) % clusterSlots
	for n := 0; ; n++ {
		name := tenant + ":" + strconv.Itoa(n)
		if (keySlot(name)-start+clusterSlots)%clusterSlots < shardWindow {
			return "{" + name + "}"
		}
	}
}

// An id carries its shard in its last four bytes, inside UUIDv7's random
// bits: byte 12 is the shard index and bytes 13-15 the first 24 bits of the
// CRC-32 of bytes 0-12. An id made before shards (or by an older replica)
// has random bytes there, and passes the check by chance once in 2^24: it is
// shard 0, and so is one that passes by chance but whose record is in shard
// 0 (the readers look there after a miss; see Store.read).

// markID writes shard s into u.
func markID(u *uuid.UUID, s int) {
	u[12] = byte(s)
	c := crc32.ChecksumIEEE(u[:13])
	u[13], u[14], u[15] = byte(c>>16), byte(c>>8), byte(c)
}

// idShard is the shard an id names, and whether it names one (a valid mark);
// 0, false for an unmarked (legacy) id. id must be valid (validID).
func idShard(id string) (int, bool) {
	var b [16]byte
	// the groups have even lengths (8-4-4-4-12): no byte straddles a dash
	for i, j := 0, 0; j < 16; {
		if id[i] == '-' {
			i++
			continue
		}
		b[j] = unhex(id[i])<<4 | unhex(id[i+1])
		i, j = i+2, j+1
	}
	c := crc32.ChecksumIEEE(b[:13])
	if b[13] != byte(c>>16) || b[14] != byte(c>>8) || b[15] != byte(c) {
		return 0, false
	}
	return int(b[12]), true
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// shardOf is the shard whose tag holds id's keys, as far as the id tells.
func shardOf(id string) int {
	s, _ := idShard(id)
	return s
}

// tag is the hash tag of tenant's shard s.
func (s *Store) tag(tenant string, shard int) string { return s.tags.tag(tenant, shard) }

// tagKeys are the keys of hash tag tag that the writes name (keys.forTag).
func (s *Store) tagKeys(tag string) *tagKeys { return s.tags.keysOf(s.k, tag) }

// idTag is the hash tag the id of a request names (shardOf).
func (s *Store) idTag(tenant, id string) string { return s.tags.tag(tenant, shardOf(id)) }

// atIDShard runs at in the shard the id names and, after a NOT_FOUND there
// when that is not shard 0, again in shard 0, where an older id that names a
// shard only by chance lives (above): one round trip unless the request is
// unknown or such an id. first is true on the first try only, which alone
// counts rate limits (a second try is the same call). named is the id's own
// tag, whose change channel the hub listens on; fromZero reports that the
// answer came from shard 0, whose script announced it on shard 0's channel,
// so the caller announces it on named's too (announceAt).
func atIDShard[T any](s *Store, tenant, id string, at func(tag string, first bool) (T, error)) (res T, named string, fromZero bool, err error) {
	shard := shardOf(id)
	named = s.tag(tenant, shard)
	res, err = at(named, true)
	if shard == 0 || domain.ErrorCode(err) != domain.NotFound {
		return res, named, false, err
	}
	res, err = at(s.tag(tenant, 0), false)
	return res, named, true, err
}

// tenantTags are the tags of tenant's shards 0..S-1: where listings, the
// sweeper and tenant-wide flags look.
func (s *Store) tenantTags(tenant string) []string {
	out := make([]string, s.opts.TenantShards)
	for i := range out {
		out[i] = s.tags.tag(tenant, i)
	}
	return out
}

// newShard picks the shard of a new request of tenant: the Idempotency-Key's
// (digest is the key's hash), so that racing creates with one key meet in one
// slot whatever each replica knows of the Cluster; else, on a Cluster, a
// master drawn evenly and then one of its shards, so that each master takes
// an even share of the tenant's new requests even where S does not divide
// among the masters (16 shards sit 6/5/5 on 3); elsewhere any shard, evenly.
func (s *Store) newShard(ctx context.Context, tenant string, digest []byte) int {
	n := s.opts.TenantShards
	if n <= 1 {
		return 0
	}
	if len(digest) >= 4 {
		return int(uint32(digest[0])<<24|uint32(digest[1])<<16|uint32(digest[2])<<8|uint32(digest[3])) % n
	}
	if _, ok := s.rdb.(*redis.ClusterClient); ok {
		groups := s.spread.of(ctx, s, tenant)
		g := groups[rand.IntN(len(groups))]
		return g[rand.IntN(len(g))]
	}
	return rand.IntN(n)
}

// shardSpread remembers, per tenant, its shards grouped by the master that
// holds them (shardGroups), for newShard: read again after spreadTTL, since a
// Cluster's slots may move. A stale grouping only evens the load less well:
// the shard a request was given is in its id, wherever its slot goes.
type shardSpread struct {
	mu sync.Mutex
	m  map[string]spread
}

type spread struct {
	groups [][]int
	at     time.Time
}

const spreadTTL = 10 * time.Second

func (t *shardSpread) of(ctx context.Context, s *Store, tenant string) [][]int {
	now := s.now()
	t.mu.Lock()
	sp, ok := t.m[tenant]
	t.mu.Unlock()
	if d := now.Sub(sp.at); ok && d >= 0 && d < spreadTTL {
		return sp.groups
	}
	sp = spread{groups: s.shardGroups(ctx, s.tenantTags(tenant)), at: now}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= shardTagCap {
		t.m = map[string]spread{}
	}
	t.m[tenant] = sp
	return sp.groups
}

// tagOf is the hash tag "{<name>}" of a shard's name: the tenant itself for its
// shard 0 (tenant-level keys live there too), "<tenant>:<n>" for another
// shard (shardName). The audit drainers treat each shard name as a tenant of
// its own (AuditTenants).
func tagOf(name domain.ShardName) string { return "{" + string(name) + "}" }

// ownTag is the tag of tenant's shard 0, whose name is the tenant's.
func ownTag(tenant string) string { return tagOf(domain.ShardName(tenant)) }

// shardName is tag without its braces.
func shardName(tag string) domain.ShardName { return domain.ShardName(tag[1 : len(tag)-1]) }

// tenantOf is the tenant a shard name belongs to.
func tenantOf(name domain.ShardName) string {
	if i := strings.IndexByte(string(name), ':'); i >= 0 {
		return string(name[:i])
	}
	return string(name)
}

// Slot arithmetic, for placing shards (above) and for finding each slot
// range's master (Ready).

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// keyInSlot returns a key that hashes to slot, found once and then remembered
// (a slot map has a handful of ranges and rarely changes).
func (s *Store) keyInSlot(slot int) string {
	s.mu.Lock()
	k, ok := s.slotKeys[slot]
	s.mu.Unlock()
	if ok {
		return k
	}
	// About 16,384 tries on average, each a CRC of a few bytes: well under a
	// millisecond, once per slot, and outside the lock creates also take.
	for i := 0; ; i++ {
		if k = strconv.Itoa(i); keySlot(k) == slot {
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slotKeys == nil {
		s.slotKeys = map[int]string{}
	}
	s.slotKeys[slot] = k
	return k
}

// keySlot is Redis Cluster's slot of a key without a hash tag: CRC16
// (XMODEM: polynomial 0x1021, initial value 0) modulo 16384. go-redis has the
// same function, but in an internal package.
func keySlot(key string) int {
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}
