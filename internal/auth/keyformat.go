package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"hash/crc32"
	"strings"
)

// The API key format, in one place: what a key looks like, how one is
// written and how one is recognised. Everything else in the package goes
// through formatKey and parseKey.
//
//	ask_<16 id chars><43 secret chars><7 check chars>   (current, 70 characters)
//	ask_<16 id chars><43 secret chars>                   (legacy, 63 characters)
//
// The id is base32 (a-z, 2-7) of 10 random bytes; the public key id is "key_"
// and those 16 characters. The secret is base64url of 32 random bytes. The
// check is verified before any Redis call, so a made-up key fails for nothing.
//
// The check of a key issued now is keyed: the first 32 bits of an
// HMAC-SHA256 of everything before it, under the key-check subkey (below), in
// the id's base32 alphabet. Only the service can compute it, so a forged key
// passes one time in 2^32 and otherwise costs no lookup.
//
// Keys issued before the keyed check carry the CRC-32C of everything before
// it instead, which anyone can compute; they, and keys of the 63-character
// shape, are legacy keys: accepted while auth.accept_legacy_keys is true,
// each unknown one costing a lookup (throttled per source), until they are
// re-issued (docs/operations.md, API keys). Neither check is what makes a key
// secret: the 256-bit secret and its SHA-256 digest do that.
const (
	keyPrefix      = "ask_"
	keyIDLen       = 16 // base32 characters of the public id
	keySecretLen   = 43 // base64url characters of 32 random bytes
	keyCheckLen    = 7  // base32 characters of 32 bits
	keyIDPrefix    = "key_"
	keyBodyLen     = len(keyPrefix) + keyIDLen + keySecretLen
	keyLen         = keyBodyLen + keyCheckLen
	legacyKeyLen   = keyBodyLen
	keyRandomBytes = 10 + 32 // id bytes, then secret bytes
)

var (
	idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// keyCheckInfo names the key-check subkey's derivation: an HMAC-SHA256 of
// this label under the configured secret (HKDF-Expand's single-block form,
// RFC 5869 §2.3, with the secret as the pseudorandom key). The subkey is
// used for nothing else, and poll tokens are MACs of a different label
// ("poll-token\x00..."), so neither use can stand for the other.
const keyCheckInfo = "asyncstatus api-key check v1\x01"

// KeyCheckKey derives the subkey of the keyed check from secret (the value
// of auth.key_check_secret, else auth.poll_token_secret).
func KeyCheckKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(keyCheckInfo))
	return m.Sum(nil)
}

// formatKey writes the plain key of keyRandomBytes random bytes with its
// check (appendCheck) and returns it with its id part (the public id without
// "key_").
func formatKey(raw []byte, appendCheck func(dst []byte, body string) []byte) (plain, idPart string) {
	idPart = idEncoding.EncodeToString(raw[:10])
	body := keyPrefix + idPart + base64.RawURLEncoding.EncodeToString(raw[10:keyRandomBytes])
	var check [keyCheckLen]byte
	return body + string(appendCheck(check[:0], body)), idPart
}

// appendCRCCheck appends the legacy check of a key body. The CRC is the
// table loop written out over the string: crc32.Checksum needs a []byte,
// and converting the key to one allocated on every authenticated call.
func appendCRCCheck(dst []byte, body string) []byte {
	sum := ^uint32(0)
	for i := 0; i < len(body); i++ {
		sum = castagnoli[byte(sum)^body[i]] ^ sum>>8
	}
	sum = ^sum
	b := [4]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)}
	return idEncoding.AppendEncode(dst, b[:])
}

// appendKeyedCheck appends the keyed check of a key body.
func (a *Authenticator) appendKeyedCheck(dst []byte, body string) []byte {
	m := a.checks.Get().(*macState)
	defer a.checks.Put(m)
	m.h.Reset()
	m.in = append(m.in[:0], body...)
	m.h.Write(m.in)
	m.sum = m.h.Sum(m.sum[:0])
	return idEncoding.AppendEncode(dst, m.sum[:4])
}

// parseKey returns the id part of a plain key, or false when plain has
// neither key shape. A loop rather than a regexp: it runs on every call. The
// check is left to checkOf, needed only before a lookup: a key found in the
// cache is proven by its digest, which covers the check characters too.
func parseKey(plain string) (idPart string, ok bool) {
	if len(plain) != keyLen && len(plain) != legacyKeyLen || !strings.HasPrefix(plain, keyPrefix) {
		return "", false
	}
	idPart = plain[len(keyPrefix) : len(keyPrefix)+keyIDLen]
	for i := 0; i < len(idPart); i++ {
		if c := idPart[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return "", false
		}
	}
	return idPart, true
}

// keyCheck is what the check of a key of a shape parseKey accepts says.
type keyCheck int

const (
	checkFails  keyCheck = iota // cannot be genuine
	checkKeyed                  // the keyed check matches: a current key
	checkLegacy                 // the CRC matches, or the 63-character shape has none
)

// checkOf tells a key that may be genuine from one that cannot, and a
// current key from a legacy one.
func (a *Authenticator) checkOf(plain string) keyCheck {
	if len(plain) != keyLen {
		return checkLegacy
	}
	var check [keyCheckLen]byte
	body, got := plain[:keyBodyLen], plain[keyBodyLen:]
	if sameCheck(a.appendKeyedCheck(check[:0], body), got) {
		return checkKeyed
	}
	if string(appendCRCCheck(check[:0], body)) == got {
		return checkLegacy
	}
	return checkFails
}

// sameCheck compares check characters in constant time: a comparison that
// stops at the first difference would tell, by its timing, how much of a
// guessed keyed check is right.
func sameCheck(want []byte, got string) bool {
	if len(want) != len(got) {
		return false
	}
	var d byte
	for i := range want {
		d |= want[i] ^ got[i]
	}
	return d == 0
}
