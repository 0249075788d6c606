package store

import "github.com/asyncstatus/asyncstatus/internal/domain"

// keys builds every Redis key asyncstatus uses; nothing else spells a key, and
// scripts receive all of theirs in KEYS. Every key of a tenant carries the hash tag
// {<tenant>}, so that one script only ever touches one cluster slot. Status codes in
// keys and records are one letter (statusCode) to keep both short.
type keys struct{ prefix string }

// record: hash, one per request. Fields: s status, v version, t type, c context,
// g progress, rt result_type, r result, f failure, x cancellation, b created_by,
// ca/ua/co/ex created/updated/completed/expires (unix ms), e events,
// ~<caller> pacing state. TTL: retention, from the terminal transition on.
func (k keys) record(tenant, id string) string {
	return k.prefix + ":{" + tenant + "}:r:" + id
}

// meta: hash of tenant flags (fz = "1" while frozen). No TTL.
func (k keys) meta(tenant string) string { return k.prefix + ":{" + tenant + "}:m" }

// statusSet: zset of the tenant's request ids in one status, score created_at ms.
func (k keys) statusSet(tenant string, s domain.Status) string {
	return k.prefix + ":{" + tenant + "}:ix:s:" + statusCode[s]
}

// typeSet: zset of the tenant's request ids of one type, score created_at ms.
func (k keys) typeSet(tenant, typ string) string {
	return k.prefix + ":{" + tenant + "}:ix:t:" + typ
}

// deadlines: zset of non-terminal request ids, score = when the sweeper must time
// them out (queued or processing timeout), unix ms.
func (k keys) deadlines(tenant string) string { return k.prefix + ":{" + tenant + "}:dl" }

// retention: zset of "<id> <type>" of terminal records that will expire, score =
// expires_at ms; the sweeper removes their index entries once the record is gone.
func (k keys) retention(tenant string) string { return k.prefix + ":{" + tenant + "}:rx" }

// idempotency: string "<fingerprint>[|<id>]", TTL idempotency.ttl. digest is the
// hex SHA-256 of operation, request id and the client's key, so any key length
// makes a short Redis key.
func (k keys) idempotency(tenant, digest string) string {
	return k.prefix + ":{" + tenant + "}:ik:" + digest
}

// tenantKeys: set of the API key ids of a tenant.
func (k keys) tenantKeys(tenant string) string { return k.prefix + ":{" + tenant + "}:keys" }

// apiKey: hash describing one API key (t tenant, s scopes, d SHA-256 digest of the
// secret, n name, c created ms). Not under a tenant tag: it is looked up before the
// tenant is known, and no script touches it.
func (k keys) apiKey(id string) string { return k.prefix + ":key:" + id }

// tenants: set of every tenant that ever created a request; the sweeper walks it.
func (k keys) tenants() string { return k.prefix + ":tenants" }

var statusCode = map[domain.Status]string{
	domain.StatusQueued: "q", domain.StatusProcessing: "p", domain.StatusSucceeded: "s",
	domain.StatusFailed: "f", domain.StatusCancelled: "c", domain.StatusExpired: "e",
}

var codeStatus = map[string]domain.Status{
	"q": domain.StatusQueued, "p": domain.StatusProcessing, "s": domain.StatusSucceeded,
	"f": domain.StatusFailed, "c": domain.StatusCancelled, "e": domain.StatusExpired,
}
