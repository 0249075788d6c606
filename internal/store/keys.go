package store

import (
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
)

// keys builds every Redis key asyncstatus uses; nothing else spells a key. Every
// key of a tenant carries a hash tag of the tenant's, so that one script only
// ever touches one cluster slot: the request keys take tag, the hash tag of one
// of the tenant's shards ("{<tenant>}" for shard 0, "{<tenant>:<n>}" for the
// others: shard.go), the tenant-level keys the tenant's own "{<tenant>}".
// Status codes in keys and records are one letter (statusCode) to keep both
// short.
//
// Scripts receive in KEYS every key Go can name before the call. Five build
// the others from a prefix in ARGV (indexPrefix, recordPrefix,
// retentionBucketPrefix, indexHeads), because the rest of the name is known
// only inside the script: transition.lua names the index and its status's
// index-head summary from the record's status and type, and the retention
// bucket from the expires_at it computes; delete.lua the index and summary
// from the record; sweep.lua the records, indexes and summaries of the
// entries of a bucket; reapply.lua the indexes and buckets of the records it
// reapplies; list.lua the indexes of the types in the meta hash and the
// summaries of the filter's statuses. create.lua gets the summary prefix too
// (its status is always queued): its KEYS end in optional entries (rate
// counters, idempotency key) whose positions it works out, and an ARGV at the
// end leaves those alone. Each such prefix carries the hash tag of the
// script's KEYS, so those keys are in the same slot: a Cluster serves them,
// and no script spans two slots.
type keys struct{ prefix string }

// record: string, one per request: its fields in one compact string (layout:
// record.go), events included. TTL: retention, from the
// terminal transition on.
func (k keys) record(tag, id string) string { return k.prefix + ":" + tag + ":r:" + id }

// recordPrefix is record without the id: scripts that find records through index
// entries (list.lua, sweep.lua) name them from it.
func (k keys) recordPrefix(tag string) string { return k.prefix + ":" + tag + ":r:" }

// changes: the pub/sub channel on which the scripts that change or remove a
// record under hash tag tag announce "<id>,<version>" (hub.go). It carries the
// record's tag, so that a script may SPUBLISH on it on a Cluster: one channel
// per tenant shard, not per id (docs/design.md, Waiting, says why); waiters of
// an id listen on the tag the id names (Store.idTag).
func (k keys) changes(tag string) string { return k.prefix + ":" + tag + ":w" }

// pacing: hash <caller> -> "n,at,ra", the poll pacing state of a non-terminal
// request (poll.lua). The terminal transition and delete remove it.
func (k keys) pacing(tag, id string) string { return k.prefix + ":" + tag + ":pc:" + id }

// meta: hash of tenant flags, one per shard, read by create.lua with one HMGET:
// fz = "1" while frozen, wh = "1" while the tenant has webhook endpoints (both
// copied into every shard: SetFrozen, copyFilter), t:<type> = "1" for every
// type created in this shard (listings without a type filter merge the indexes
// of each; they never go, and stay few), and lh = "1" once the shard's
// indexHeads may be trusted. No TTL.
func (k keys) meta(tag string) string { return k.prefix + ":" + tag + ":m" }

// index: zset of the tenant's request ids in one status and of one type, score
// created_at ms. A request is in exactly one index (its status, its type), so a
// terminal request costs one index entry, and a listing by status, by type, or
// by both reads exactly the sets it needs (list.lua). Scripts that learn the
// type from the record name the set from indexPrefix.
func (k keys) index(tag string, s domain.Status, typ string) string {
	return k.indexPrefix(tag) + statusCode[s] + ":" + typ
}

func (k keys) indexPrefix(tag string) string { return k.prefix + ":" + tag + ":ix:" }

// labelIndexPrefix: the prefix of the label indexes, one zset per status and
// label ("<labelIndexPrefix><status letter>:<name>=<value>", the label in
// domain.Labels' spelling), member a request id, score its created_at (ms). A
// request with labels is in the index of each of its labels for its status:
// create.lua adds them, transition.lua moves them with the (status, type)
// entry, delete.lua, sweep.lua and reapply.lua remove them. The scripts
// other than create.lua name them from indexPrefix + "l:" (no status letter is
// "l", so no label index is a (status, type) index). docs/listing.md, Labels.
func (k keys) labelIndexPrefix(tag string) string { return k.indexPrefix(tag) + "l:" }

// labelIndex is the label index of (status, label term).
func (k keys) labelIndex(tag string, s domain.Status, term string) string {
	return k.labelIndexPrefix(tag) + statusCode[s] + ":" + term
}

// indexHeads: the prefix of the index-head summaries, one zset per shard and
// status ("<indexHeads><status letter>"), member a type, score at least the
// newest created_at (ms) in that (status, type) index: create.lua and
// transition.lua raise it (ZADD GT) with every entry they add; delete.lua and
// sweep.lua drop the member of an index they empty (sweep.lua also the
// type's emptied queued and processing members, which transitions leave);
// other removals leave the score high, and a first list page lowers a stale
// one (list.lua). A listing
// without a type filter opens only the indexes whose score can still reach the
// page, not every index of every type (docs/listing.md). Trusted once the meta
// hash's field lh is "1" (list.lua builds them then, once per shard). Per
// index, not per request: a few bytes per type and status.
func (k keys) indexHeads(tag string) string { return k.prefix + ":" + tag + ":ixh:" }

// deadlines: zset of non-terminal request ids, score = when the sweeper must time
// them out (queued or processing timeout), unix ms.
func (k keys) deadlines(tag string) string { return k.prefix + ":" + tag + ":dl" }

// retentionBuckets: zset of the ends (unix ms, member = score) of the tenant's
// retention buckets. A bucket, "<retentionBucketPrefix><end>", is a list of
// "<status letter><id><type>" of terminal records whose expires_at falls in
// [end - width, end); the sweeper empties it once end has passed (sweep.lua).
// Lists of short entries are compact (listpack), where a zset entry per record
// would cost ~150 B: see docs/performance.md.
func (k keys) retentionBuckets(tag string) string { return k.prefix + ":" + tag + ":rbi" }

func (k keys) retentionBucketPrefix(tag string) string { return k.prefix + ":" + tag + ":rb:" }

// idempotency: string "<fingerprint>[|<id>]", TTL idempotency.ttl. digest is the
// hex SHA-256 of operation, request id and the client's key, so any key length
// makes a short Redis key.
func (k keys) idempotency(tag, digest string) string { return k.prefix + ":" + tag + ":ik:" + digest }

// tenantKeys: set of the API key ids of a tenant.
func (k keys) tenantKeys(tenant string) string { return k.prefix + ":{" + tenant + "}:keys" }

// rateCounters: the rate-limit counters (string, TTL = the window) that a call
// of credential, for a route needing scope, is counted on when it acts on a
// request under hash tag tag (ratelimit.CounterKeys spells them, for
// internal/ratelimit's limiter too). They carry the record's tag, so that the
// script serving the call counts it in its own slot; with a tenant's records
// spread over several shards, each shard has its own counters
// (docs/pacing.md says how exact the limits then are).
func (k keys) rateCounters(tag, scope, credential string) (cred, tenantWide string) {
	c, t := ratelimit.CounterKeys(tag, scope, credential)
	return k.prefix + ":" + c, k.prefix + ":" + t
}

// apiKey: hash describing one API key (t tenant, s scopes, d SHA-256 digest of the
// secret, n name, c created ms). Not under a tenant tag: it is looked up before the
// tenant is known, and no script touches it.
func (k keys) apiKey(id string) string { return k.prefix + ":key:" + id }

// operatorKeys: set of the ids of the operator keys (docs/reference.md §14), which belong to
// no tenant.
func (k keys) operatorKeys() string { return k.prefix + ":operator-keys" }

// consoleSession: hash of one console session (k key id, t tenant, o "1" for
// an operator key, e expiry ms), named by the hex SHA-256 of the cookie value,
// TTL console.session_ttl. consoleSignIn: string key id of a one-time sign-in
// token, named by the token's digest, TTL a few minutes. Outside every tenant
// slot: only single-key commands touch them.
func (k keys) consoleSession(digest string) string { return k.prefix + ":console:s:" + digest }

func (k keys) consoleSignIn(digest string) string { return k.prefix + ":console:once:" + digest }

// tenants: set of every tenant that ever created a request; the sweeper walks it.
func (k keys) tenants() string { return k.prefix + ":tenants" }

// audit: stream of audit entries (docs/operations.md, Audit trail), one per
// create, transition, heartbeat and delete, written by the same script as the
// change; consumer group "audit". Entries are deleted once a sink has written
// them. It is built from the tag of the records whose changes it holds, so
// that it stays in their slot: each tenant shard has its own stream.
func (k keys) audit(tag string) string { return k.prefix + ":" + tag + ":au" }

// auditLease names the drainer reading a shard's audit stream (ReadAudit):
// a string holding its consumer name, with a TTL, in the stream's slot.
func (k keys) auditLease(tag string) string { return k.prefix + ":" + tag + ":aul" }

// Webhooks (docs/reference.md §10, store/webhooks.go).

// webhook: hash describing one endpoint (u url, ev event letters, d description,
// ca created ms, k secret sealed with AES-GCM). No TTL.
func (k keys) webhook(tenant, id string) string {
	return k.prefix + ":{" + tenant + "}:wh:" + id
}

// webhookFilter: hash endpoint id -> event letters ("q" created, "p" processing,
// "sfce" terminal). create.lua and transition.lua read it to know which
// endpoints get a message; empty for most tenants. No TTL.
func (k keys) webhookFilter(tag string) string { return k.prefix + ":" + tag + ":whm" }

// outbox: stream of webhook messages, one entry per (message, endpoint), written
// by the same script as the transition; consumer group "dispatch". Entries are
// deleted once delivered or finally failed; XADD MAXLEN ~ bounds it as a guard.
func (k keys) outbox(tag string) string { return k.prefix + ":" + tag + ":ob" }

// webhookRetries: zset of "<outbox entry id>|<attempts made>" waiting for their
// next attempt, score = when it is due (unix ms); while a replica sends it, the
// score is its lease (now + timeout + slack).
func (k keys) webhookRetries(tag string) string { return k.prefix + ":" + tag + ":wr" }

// webhookLog: list of an endpoint's delivery attempts as JSON, newest first,
// capped with LTRIM.
func (k keys) webhookLog(tag, id string) string { return k.prefix + ":" + tag + ":wl:" + id }

// webhookTenants: set of tenants that have (or had) webhook endpoints; the
// dispatchers walk it. Outside every tenant slot: written with single-key SADD
// and SREM only, never in a script.
func (k keys) webhookTenants() string { return k.prefix + ":webhook-tenants" }

// changeLog: stream of the changes of one tenant shard for watches
// (docs/reference.md §16; watch.go): one entry per create, transition and
// heartbeat ("i" request id, "r" the record as the change left it), written
// by the script of the change while the shard is watched (meta field cw),
// plus gap entries ("g") where it was not. The sweeper trims it by time and
// length and moves the meta field cm, the id up to which it may have lost
// entries, along. It carries the record's tag, so it is in the script's slot.
// The scripts of changes name it, and the change channel, from the meta key
// (lib.lua, changelog_add): meta, changes and changeLog keep their endings
// ":m", ":w" and ":cl" (TestChangeLogNamedFromMeta).
func (k keys) changeLog(tag string) string { return k.prefix + ":" + tag + ":cl" }

// tagKeys are the keys and key prefixes of one shard (hash tag) that the hot
// writes (create, the transitions) name on every call, spelled once per shard
// (keys.forTag, kept by shardTags.keysOf) instead of once per call. The whole
// keys are also kept boxed (any): a write hands its keys and arguments to
// go-redis as []any, and boxing a string allocates. Each field is what the
// keys method of the same name spells for the tag
// (TestTagKeysSpellTheKeys).
type tagKeys struct {
	// recordPrefix, pacingPrefix and idempotencyPrefix are record, pacing
	// and idempotency without their last part (the id, the digest);
	// indexPrefix is what index appends a status and a type to.
	recordPrefix, pacingPrefix, idempotencyPrefix, indexPrefix string

	meta, deadlines, retentionBuckets, webhookFilter, outbox, audit, changes any
	// the prefixes the scripts take in ARGV (indexPrefixArg is indexPrefix
	// boxed)
	indexPrefixArg, labelIndexPrefix, indexHeads, retentionBucketPrefix any
}

// forTag spells the keys of tagKeys for hash tag tag.
func (k keys) forTag(tag string) *tagKeys {
	return &tagKeys{
		recordPrefix:          k.recordPrefix(tag),
		pacingPrefix:          k.pacing(tag, ""),
		idempotencyPrefix:     k.idempotency(tag, ""),
		indexPrefix:           k.indexPrefix(tag),
		meta:                  k.meta(tag),
		deadlines:             k.deadlines(tag),
		retentionBuckets:      k.retentionBuckets(tag),
		webhookFilter:         k.webhookFilter(tag),
		outbox:                k.outbox(tag),
		audit:                 k.audit(tag),
		changes:               k.changes(tag),
		indexPrefixArg:        k.indexPrefix(tag),
		labelIndexPrefix:      k.labelIndexPrefix(tag),
		indexHeads:            k.indexHeads(tag),
		retentionBucketPrefix: k.retentionBucketPrefix(tag),
	}
}

// record is keys.record of the tag.
func (t *tagKeys) record(id string) string { return t.recordPrefix + id }

// pacing is keys.pacing of the tag.
func (t *tagKeys) pacing(id string) string { return t.pacingPrefix + id }

// idempotency is keys.idempotency of the tag.
func (t *tagKeys) idempotency(digest string) string { return t.idempotencyPrefix + digest }

// index is keys.index of the tag.
func (t *tagKeys) index(s domain.Status, typ string) string {
	return t.indexPrefix + statusCode[s] + ":" + typ
}
