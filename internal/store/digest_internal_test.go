package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// fingerprint and idemDigest hash exactly the bytes they always hashed:
// Redis keeps both (idempotency entries and their keys), so a replica with
// another spelling of them would not find what one with the old wrote. The
// parts include ones past the stack buffers.
func TestDigestsHashTheSameBytes(t *testing.T) {
	long := strings.Repeat("x", 3000)
	for _, parts := range [][]string{
		{"create", "statement.export", `{"a":1}`, "180", ""},
		{"complete", long, "answer"},
		{"cancel", "", ""},
		{},
	} {
		h := sha256.New()
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
		if got, want := fingerprint(parts...), hex.EncodeToString(h.Sum(nil)[:16]); got != want {
			t.Errorf("fingerprint(%.40q) = %s, want %s", parts, got, want)
		}
	}
	for _, key := range []string{"k", "idem-1", long} {
		for _, id := range []string{"", "0193a5b2-7c1d-7e4f-8a2b-3c4d5e6f7a8b"} {
			want := sha256.Sum256([]byte("complete\n" + id + "\n" + key))
			if got := idemDigest("complete", id, domain.IdempotencyKey(key)); string(got) != string(want[:16]) {
				t.Errorf("idemDigest(%q, %.20q) = %x, want %x", id, key, got, want[:16])
			}
		}
	}
}
