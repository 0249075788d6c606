// Package auth turns credentials into a domain.Principal: API keys (stored only as
// SHA-256 digests, compared in constant time, cached briefly in process) and poll
// tokens (derived by HMAC from the request id, so never stored at all). It imports
// internal/domain only; key storage is behind the KeyStore interface.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// KeyStore keeps API key descriptions.
type KeyStore interface {
	LookupKey(ctx context.Context, id string) (domain.APIKey, error)
	SaveKey(ctx context.Context, k domain.APIKey) error
}

var tenantPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidTenant reports whether t can name a tenant: it appears in Redis hash tags and
// in poll tokens, so braces, dots and upper case are refused.
func ValidTenant(t string) bool { return tenantPattern.MatchString(t) }

// NewKey makes an API key with the legacy, unkeyed check (keyformat.go):
// for tests and tools that hold no secret. The service issues keys with
// (*Authenticator).NewKey.
func NewKey(tenant string, scopes domain.Scopes, name string, now time.Time) (plain string, k domain.APIKey, err error) {
	return newKey(appendCRCCheck, tenant, scopes, name, now)
}

// NewOperatorKey is NewKey for an operator key (see
// (*Authenticator).NewOperatorKey).
func NewOperatorKey(name string, now time.Time) (plain string, k domain.APIKey, err error) {
	plain, k, err = NewKey("operator", 0, name, now)
	k.Tenant, k.Operator = "", true
	return plain, k, err
}

// NewKey makes an API key: the plain key (shown once), with the keyed check,
// and its stored description.
func (a *Authenticator) NewKey(tenant string, scopes domain.Scopes, name string, now time.Time) (plain string, k domain.APIKey, err error) {
	return newKey(a.appendKeyedCheck, tenant, scopes, name, now)
}

// NewOperatorKey makes an operator key (docs/reference.md §14): a console-only key of no
// tenant, which the public API refuses and the console lets see every tenant.
// It has the same form as any key, so nothing in a key tells it apart.
func (a *Authenticator) NewOperatorKey(name string, now time.Time) (plain string, k domain.APIKey, err error) {
	plain, k, err = a.NewKey("operator", 0, name, now)
	k.Tenant, k.Operator = "", true
	return plain, k, err
}

func newKey(check func([]byte, string) []byte, tenant string, scopes domain.Scopes, name string, now time.Time) (plain string, k domain.APIKey, err error) {
	if !ValidTenant(tenant) {
		return "", domain.APIKey{}, domain.Errorf(domain.ValidationFailed, "tenant must match %s", tenantPattern)
	}
	raw := make([]byte, keyRandomBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", domain.APIKey{}, err
	}
	plain, idPart := formatKey(raw, check)
	k = domain.APIKey{ID: keyIDPrefix + idPart, Tenant: tenant, Scopes: scopes, Name: name,
		CreatedAt: now.UTC().Truncate(time.Millisecond), Digest: sha256.Sum256([]byte(plain))}
	return plain, k, nil
}

// Options configure an Authenticator.
type Options struct {
	// PollSecret keys the poll-token HMAC (auth.poll_token_secret).
	PollSecret []byte
	// KeyCheckSecret is what the key-check subkey is derived from
	// (auth.key_check_secret). default: PollSecret.
	KeyCheckSecret []byte
	// CacheTTL is how long a looked-up key is trusted (a revocation bites
	// within it; 0: never cached).
	CacheTTL time.Duration
	// RefuseLegacyKeys refuses, without a lookup, every key without the keyed
	// check (auth.accept_legacy_keys false). default: false (accepted).
	RefuseLegacyKeys bool
	// Now is the clock. default: time.Now.
	Now func() time.Time
}

// Authenticator checks credentials.
type Authenticator struct {
	keys         KeyStore
	cacheTTL     time.Duration
	secret       []byte
	checkKey     []byte
	refuseLegacy bool
	now          func() time.Time

	// unknown throttles, per source, the lookups of keys that pass their
	// check and are not found.
	unknown sourceBudget

	// hits and misses cache lookups by id part, in two maps so that a flood
	// of unknown ids (which pass the check only one time in 2^32, or have
	// the legacy shape) can never push a real key out.
	mu     sync.Mutex
	hits   map[string]cached
	misses map[string]time.Time // id part -> until when it is known absent

	// macs pools keyed HMAC states (*macState): hmac.New allocates and keys a
	// new one, about a tenth of a create's CPU. checks does the same for the
	// key check.
	macs, checks sync.Pool
}

// macState is a keyed HMAC with scratch space, so that a MAC allocates nothing.
type macState struct {
	h       hash.Hash
	in, sum []byte
}

type cached struct {
	key     domain.APIKey
	expires time.Time
}

// maxCache and maxMisses bound the caches so that random key ids cannot grow
// them without limit; a full cache evicts one entry per new one.
const (
	maxCache  = 100_000
	maxMisses = 10_000
)

// missTTL is how long an unknown key id is remembered as unknown. Short, and
// independent of auth.key_cache_ttl (which bounds how long a revoked key keeps
// working): a key id is random and unknown until its key is made, so caching
// its absence delays no real key; it only spares Redis a repeated guess.
const missTTL = 10 * time.Second

// New returns an Authenticator. pollSecret keys the poll-token HMAC; cacheTTL is how
// long a looked-up key is trusted (a revocation bites within it; 0: never
// cached); an unknown key id is remembered for missTTL.
func New(keys KeyStore, pollSecret []byte, cacheTTL time.Duration, now func() time.Time) *Authenticator {
	return NewWithOptions(keys, Options{PollSecret: pollSecret, CacheTTL: cacheTTL, Now: now})
}

// NewWithOptions returns an Authenticator configured by o.
func NewWithOptions(keys KeyStore, o Options) *Authenticator {
	if o.Now == nil {
		o.Now = time.Now
	}
	if len(o.KeyCheckSecret) == 0 {
		o.KeyCheckSecret = o.PollSecret
	}
	a := &Authenticator{keys: keys, cacheTTL: o.CacheTTL, secret: o.PollSecret, checkKey: KeyCheckKey(o.KeyCheckSecret),
		refuseLegacy: o.RefuseLegacyKeys, now: o.Now, hits: map[string]cached{}, misses: map[string]time.Time{}}
	a.macs.New = func() any { return &macState{h: hmac.New(sha256.New, a.secret)} }
	a.checks.New = func() any { return &macState{h: hmac.New(sha256.New, a.checkKey)} }
	return a
}

func errUnauthenticated() error {
	return domain.Errorf(domain.Unauthenticated, "A valid API key is required: Authorization: Bearer <key>.")
}

// APIKey authenticates a plain API key. Operator keys are refused: they are
// valid on the console only (docs/reference.md §14).
func (a *Authenticator) APIKey(ctx context.Context, plain string) (domain.Principal, error) {
	return a.APIKeyFrom(ctx, plain, netip.Addr{})
}

// APIKeyFrom is APIKey for a call from source (the client's address; the
// zero Addr: unknown): a source whose keys keep passing their check and
// being unknown is refused further lookups for a while (sourceBudget).
func (a *Authenticator) APIKeyFrom(ctx context.Context, plain string, source netip.Addr) (domain.Principal, error) {
	k, err := a.check(ctx, plain, source)
	if err != nil {
		return domain.Principal{}, err
	}
	if k.Operator {
		return domain.Principal{}, errUnauthenticated()
	}
	return domain.Principal{Tenant: k.Tenant, KeyID: k.ID, Scopes: k.Scopes}, nil
}

// ConsoleKey authenticates a key for the console: an operator key, or a
// tenant key with the admin scope (docs/reference.md §14).
func (a *Authenticator) ConsoleKey(ctx context.Context, plain string) (domain.APIKey, error) {
	k, err := a.check(ctx, plain, netip.Addr{})
	if err != nil {
		return domain.APIKey{}, err
	}
	if !k.Operator && !k.Scopes.Has(domain.ScopeAdmin) {
		return domain.APIKey{}, errUnauthenticated()
	}
	return k, nil
}

// KeyByID reports whether the key of public id id still exists, through the
// same cache as APIKey: a console session asks on every page, so it ends
// within the cache TTL of its key's revocation.
func (a *Authenticator) KeyByID(ctx context.Context, id string) (domain.APIKey, bool, error) {
	idPart, ok := strings.CutPrefix(id, keyIDPrefix)
	if !ok || len(idPart) != keyIDLen {
		return domain.APIKey{}, false, nil
	}
	return a.lookup(ctx, idPart, "", netip.Addr{})
}

// check finds the stored key of a plain key and compares its digest.
func (a *Authenticator) check(ctx context.Context, plain string, source netip.Addr) (domain.APIKey, error) {
	idPart, ok := parseKey(plain)
	if !ok {
		return domain.APIKey{}, errUnauthenticated()
	}
	k, found, err := a.lookup(ctx, idPart, plain, source)
	if err != nil {
		return domain.APIKey{}, err
	}
	// hashed from a stack copy: []byte(plain) would allocate on every call
	var buf [keyLen]byte
	d := sha256.Sum256(append(buf[:0], plain...))
	if !found || subtle.ConstantTimeCompare(d[:], k.Digest[:]) != 1 {
		return domain.APIKey{}, errUnauthenticated()
	}
	return k, nil
}

// lookup finds the key of id part idPart (of the plain key plain). The caches
// are keyed by the id part, so that a hit builds no string; idPart may point
// into a reused buffer (a request header), so a new entry's key is a copy.
// A key whose check fails (or a legacy key, when they are refused) is not
// found, without a lookup or a cache entry, and so is any key from a source
// out of its budget of unknown keys; plain is "" for KeyByID, whose id comes
// from a session made with a checked key.
func (a *Authenticator) lookup(ctx context.Context, idPart, plain string, source netip.Addr) (domain.APIKey, bool, error) {
	now := a.now()
	a.mu.Lock()
	c, hit := a.hits[idPart]
	until, miss := a.misses[idPart]
	a.mu.Unlock()
	switch {
	case hit && now.Before(c.expires):
		return c.key, true, nil
	case miss && now.Before(until):
		return domain.APIKey{}, false, nil
	}
	if plain != "" {
		switch a.checkOf(plain) {
		case checkFails:
			return domain.APIKey{}, false, nil
		case checkLegacy:
			if a.refuseLegacy {
				return domain.APIKey{}, false, nil
			}
		}
	}
	if source.IsValid() && !a.unknown.allow(source, now) {
		return domain.APIKey{}, false, nil
	}
	k, err := a.keys.LookupKey(ctx, keyIDPrefix+idPart)
	if err != nil && domain.ErrorCode(err) != domain.NotFound {
		return domain.APIKey{}, false, err
	}
	found := err == nil
	if !found && source.IsValid() {
		a.unknown.spend(source, now)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	id := strings.Clone(idPart)
	switch {
	case !found:
		delete(a.hits, idPart)
		evictOne(a.misses, maxMisses)
		a.misses[id] = now.Add(missTTL)
	case a.cacheTTL > 0:
		delete(a.misses, idPart)
		evictOne(a.hits, maxCache)
		a.hits[id] = cached{key: k, expires: now.Add(a.cacheTTL)}
	}
	return k, found, nil
}

// evictOne makes room for one entry in a map bounded to max: it deletes one
// entry (the first the randomised map iteration yields), never the lot, so
// that a full cache keeps serving the keys in use.
func evictOne[V any](m map[string]V, max int) {
	if len(m) < max {
		return
	}
	for k := range m {
		delete(m, k)
		return
	}
}

// PollToken derives the poll token of a request: "<tenant>.<base64url HMAC>". The
// tenant is in clear so the token alone finds the record; the MAC makes it
// unguessable (256 bits) and lets the service check it without storing it.
func (a *Authenticator) PollToken(tenant, id string) string {
	m := a.mac(tenant, id)
	defer a.macs.Put(m)
	var buf [64 + 1 + 43]byte // a valid tenant, the dot, the MAC in base64
	b := append(buf[:0], tenant...)
	b = append(b, '.')
	return string(base64.RawURLEncoding.AppendEncode(b, m.sum))
}

// mac computes the poll-token MAC of (tenant, id) into m.sum; put m back into
// a.macs when done with it.
func (a *Authenticator) mac(tenant, id string) *macState {
	m := a.macs.Get().(*macState)
	m.h.Reset()
	m.in = append(append(append(append(m.in[:0], "poll-token\x00"...), tenant...), 0), id...)
	m.h.Write(m.in)
	m.sum = m.h.Sum(m.sum[:0])
	return m
}

// strictRawURL decodes only the canonical base64url spelling of a value.
var strictRawURL = base64.RawURLEncoding.Strict()

// PollTokenPrincipal checks a poll token for request id. A wrong token is NOT_FOUND,
// exactly like an id the caller may not see.
func (a *Authenticator) PollTokenPrincipal(token, id string) (domain.Principal, error) {
	tenant, macPart, ok := strings.Cut(token, ".")
	if !ok || !ValidTenant(tenant) {
		return domain.Principal{}, domain.ErrNotFound()
	}
	// The MAC is 32 bytes, 43 characters: any other length cannot match (and
	// decoding on the stack needs a bound).
	var in [43]byte
	var got [32]byte
	if len(macPart) != len(in) {
		return domain.Principal{}, domain.ErrNotFound()
	}
	copy(in[:], macPart)
	// Strict: the last character carries two spare bits, and only the
	// spelling with them zero (the one PollToken writes) is the token; the
	// other three would be distinct strings that all authenticate.
	n, err := strictRawURL.Decode(got[:], in[:])
	if err != nil || n != len(got) {
		return domain.Principal{}, domain.ErrNotFound()
	}
	m := a.mac(tenant, id)
	defer a.macs.Put(m)
	if !hmac.Equal(got[:], m.sum) {
		return domain.Principal{}, domain.ErrNotFound()
	}
	return domain.Principal{Tenant: tenant, Scopes: domain.ScopeRead, PollTokenFor: id}, nil
}
