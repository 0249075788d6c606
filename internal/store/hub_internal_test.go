package store

import (
	"strings"
	"testing"
)

// hashTag is the part of a key Redis Cluster hashes: between the first "{" and
// the next "}".
func hashTag(key string) string {
	_, rest, ok := strings.Cut(key, "{")
	if !ok {
		return key
	}
	tag, _, ok := strings.Cut(rest, "}")
	if !ok || tag == "" {
		return key
	}
	return tag
}

// The change channel of a record must live in the record's slot, so that the
// scripts may publish on it on a Cluster, whatever the tag becomes.
func TestChangeChannelSharesTheRecordsHashTag(t *testing.T) {
	k := keys{prefix: "as"}
	tags := &shardTags{}
	for _, tenant := range []string{"acme", "a", "t-1_x"} {
		for _, id := range []string{"01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", "01936f7e-8a3c-7b51-9a56-000000000000", markedID(t, 7)} {
			tag := tags.tag(tenant, shardOf(id))
			rec, ch := k.record(tag, id), k.changes(tag)
			if hashTag(rec) != hashTag(ch) || hashTag(rec) == rec {
				t.Fatalf("record %q and channel %q hash differently", rec, ch)
			}
		}
	}
}
