package webhook

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// secretPrefix starts every endpoint secret (Standard Webhooks).
const secretPrefix = "whsec_"

// secretBytes is the length of the random part of a secret: the Standard
// Webhooks range is 24 to 64 bytes.
const secretBytes = 32

// NewSecret makes an endpoint signing secret: "whsec_" + base64 of 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("new webhook secret: %w", err)
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// SecretKey returns the HMAC key of a secret: the base64-decoded part after "whsec_".
func SecretKey(secret string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil {
		return nil, fmt.Errorf("webhook secret is not whsec_<base64>: %w", err)
	}
	return b, nil
}

// Sign computes the Standard Webhooks signature header value of one attempt:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Sealer encrypts endpoint secrets at rest with AES-256-GCM under a key derived
// (HKDF-SHA256) from webhooks.secret_key. The endpoint's tenant and id are the
// additional data, so a sealed secret copied to another endpoint does not open.
// For rotation it also holds keys derived from webhooks.previous_secret_keys:
// secrets sealed under one of them still open, and Reseal moves them to the
// current key.
type Sealer struct{ aeads []cipher.AEAD } // [0] seals; each opens

// sealedPrefix versions the sealed form, to allow another scheme later.
const sealedPrefix = "v1."

// NewSealer derives the encryption key from key and an opening key from each of
// previous (any length; at least 32 random bytes recommended).
func NewSealer(key []byte, previous ...[]byte) (*Sealer, error) {
	s := &Sealer{}
	for _, k := range append([][]byte{key}, previous...) {
		aead, err := newAEAD(k)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) == 0 {
		return nil, errors.New("webhook secret key is empty")
	}
	k, err := hkdf.Key(sha256.New, key, nil, "asyncstatus webhook endpoint secrets v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// RandomSealer makes a sealer under a random key: for the embedded store, whose
// data lives and dies with the process anyway.
func RandomSealer() (*Sealer, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return NewSealer(k)
}

func sealAD(tenant, id string) []byte { return []byte(tenant + "\x00" + id) }

// Seal encrypts an endpoint's secret under the current key.
func (s *Sealer) Seal(tenant, id, secret string) (string, error) {
	aead := s.aeads[0]
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := aead.Seal(nonce, nonce, []byte(secret), sealAD(tenant, id))
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(out), nil
}

// Open decrypts a sealed secret under any key the sealer holds; it fails when
// none of them sealed it (webhooks.secret_key changed without keeping the old one
// in webhooks.previous_secret_keys).
func (s *Sealer) Open(tenant, id, sealed string) (string, error) {
	plain, _, err := s.open(tenant, id, sealed)
	return plain, err
}

// Reseal returns sealed under the current key, and whether that changed it: a
// secret already sealed under the current key is returned as it is.
func (s *Sealer) Reseal(tenant, id, sealed string) (string, bool, error) {
	plain, by, err := s.open(tenant, id, sealed)
	if err != nil || by == 0 {
		return sealed, false, err
	}
	again, err := s.Seal(tenant, id, plain)
	return again, err == nil, err
}

// open decrypts sealed and tells which key did (0: the current one).
func (s *Sealer) open(tenant, id, sealed string) (string, int, error) {
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(sealed, sealedPrefix))
	n := s.aeads[0].NonceSize() // the same for every key: GCM's standard nonce
	if err != nil || !strings.HasPrefix(sealed, sealedPrefix) || len(b) < n {
		return "", 0, errors.New("sealed webhook secret is malformed")
	}
	for i, aead := range s.aeads {
		if plain, err := aead.Open(nil, b[:n], b[n:], sealAD(tenant, id)); err == nil {
			return string(plain), i, nil
		}
	}
	return "", 0, errors.New("webhook secret does not decrypt under webhooks.secret_key or any of webhooks.previous_secret_keys: was the key changed without keeping the old one?")
}
