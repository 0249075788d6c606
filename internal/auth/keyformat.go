package auth

import (
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
// check is the CRC-32C of everything before it, in the id's base32 alphabet:
// the service verifies it before any Redis call, so a made-up key fails for
// nothing (one in 2^32 random strings passes; that one then costs one lookup,
// as every key of the legacy shape does, and is cached as a miss). The check is
// unkeyed on purpose: it filters garbage, it is not what makes a key secret
// (the 256-bit secret and its SHA-256 digest do that), and keys do not depend
// on any server secret.
const (
	keyPrefix      = "ask_"
	keyIDLen       = 16 // base32 characters of the public id
	keySecretLen   = 43 // base64url characters of 32 random bytes
	keyCheckLen    = 7  // base32 characters of a CRC-32C
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

// formatKey writes the plain key of keyRandomBytes random bytes and returns
// it with its id part (the public id without "key_").
func formatKey(raw []byte) (plain, idPart string) {
	idPart = idEncoding.EncodeToString(raw[:10])
	body := keyPrefix + idPart + base64.RawURLEncoding.EncodeToString(raw[10:keyRandomBytes])
	var check [keyCheckLen]byte
	return body + string(appendCheck(check[:0], body)), idPart
}

// appendCheck appends the check characters of a key body.
func appendCheck(dst []byte, body string) []byte {
	sum := crc32.Checksum([]byte(body), castagnoli)
	b := [4]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)}
	return idEncoding.AppendEncode(dst, b[:])
}

// parseKey returns the id part of a plain key, or false when plain cannot be a
// key: wrong shape, or (current format) a check that does not match. A loop
// rather than a regexp: it runs on every call.
func parseKey(plain string) (idPart string, ok bool) {
	switch {
	case len(plain) == keyLen:
	case len(plain) == legacyKeyLen:
	default:
		return "", false
	}
	if !strings.HasPrefix(plain, keyPrefix) {
		return "", false
	}
	idPart = plain[len(keyPrefix) : len(keyPrefix)+keyIDLen]
	for i := 0; i < len(idPart); i++ {
		if c := idPart[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return "", false
		}
	}
	if len(plain) == keyLen {
		var check [keyCheckLen]byte
		if string(appendCheck(check[:0], plain[:keyBodyLen])) != plain[keyBodyLen:] {
			return "", false
		}
	}
	return idPart, true
}
