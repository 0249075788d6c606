package store

import (
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// The keys a shard's tagKeys spelled once are the keys the per-call
// spelling names, for shard 0's tag and for the Cluster hash-tag form of the
// other shards', under the default and another prefix.
func TestTagKeysSpellTheKeys(t *testing.T) {
	const id, digest = "0193a5b2-7c1d-7e4f-8a2b-3c4d5e6f7a8b", "00112233445566778899aabbccddeeff"
	for _, prefix := range []string{"as", "other:prefix"} {
		k := keys{prefix: prefix}
		for _, tenant := range []string{"acme", "t", "tenant-with-dashes_and_underscores", "x9"} {
			for _, shard := range []int{0, 1, 7, 255} {
				tag := findShardTag(tenant, shard)
				if shard > 0 && tag == "{"+tenant+"}" {
					t.Fatalf("shard %d of %s: tag %s is shard 0's", shard, tenant, tag)
				}
				tk := k.forTag(tag)
				for _, c := range []struct {
					name      string
					got, want any
				}{
					{"record", tk.record(id), k.record(tag, id)},
					{"pacing", tk.pacing(id), k.pacing(tag, id)},
					{"idempotency", tk.idempotency(digest), k.idempotency(tag, digest)},
					{"index", tk.index(domain.StatusQueued, "statement.export"), k.index(tag, domain.StatusQueued, "statement.export")},
					{"index succeeded", tk.index(domain.StatusSucceeded, "t"), k.index(tag, domain.StatusSucceeded, "t")},
					{"meta", tk.meta, k.meta(tag)},
					{"deadlines", tk.deadlines, k.deadlines(tag)},
					{"retentionBuckets", tk.retentionBuckets, k.retentionBuckets(tag)},
					{"webhookFilter", tk.webhookFilter, k.webhookFilter(tag)},
					{"outbox", tk.outbox, k.outbox(tag)},
					{"audit", tk.audit, k.audit(tag)},
					{"changes", tk.changes, k.changes(tag)},
					{"indexPrefix", tk.indexPrefixArg, k.indexPrefix(tag)},
					{"labelIndexPrefix", tk.labelIndexPrefix, k.labelIndexPrefix(tag)},
					{"indexHeads", tk.indexHeads, k.indexHeads(tag)},
					{"retentionBucketPrefix", tk.retentionBucketPrefix, k.retentionBucketPrefix(tag)},
				} {
					if c.got != c.want {
						t.Errorf("prefix %q, tag %s: %s = %#v, want %#v", prefix, tag, c.name, c.got, c.want)
					}
				}
			}
		}
	}
	// A Store hands out one shard's tagKeys once, and another tag's apart.
	var st shardTags
	k := keys{prefix: "as"}
	a, b := st.keysOf(k, "{acme}"), st.keysOf(k, findShardTag("acme", 3))
	if st.keysOf(k, "{acme}") != a || a == b || b.meta != k.meta(findShardTag("acme", 3)) {
		t.Errorf("keysOf: %p %p %p", a, st.keysOf(k, "{acme}"), b)
	}
}
