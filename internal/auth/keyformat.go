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

// appendCheck appends the check characters of a key body. The CRC is the
// table loop written out over the string: crc32.Checksum needs a []byte,
// and converting the key to one allocated on every authenticated call.
func appendCheck(dst []byte, body string) []byte {
	sum := ^uint32(0)
	for i := 0; i < len(body); i++ {
		sum = castagnoli[byte(sum)^body[i]] ^ sum>>8
	}
	sum = ^sum
	b := [4]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)}
	return idEncoding.AppendEncode(dst, b[:])
}

// parseKey returns the id part of a plain key, or false when plain has
// neither key shape. A loop rather than a regexp: it runs on every call. The
// check is left to checkOK, needed only before a lookup: a key found in the
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

// checkOK reports whether a key of a shape parseKey accepts may be genuine:
// its check matches (current format), or it has the legacy shape, which has
// none.
func checkOK(plain string) bool {
	if len(plain) != keyLen {
		return true
	}
	var check [keyCheckLen]byte
	return string(appendCheck(check[:0], plain[:keyBodyLen])) == plain[keyBodyLen:]
}
