package httpapi_test

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/httpapi"
)

// forgedKey is a made-up API key with the public CRC check of keys issued
// before the keyed one: it passes that check, and its id is unknown.
func forgedKey() string {
	raw := make([]byte, 42)
	_, _ = rand.Read(raw)
	enc := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
	body := "ask_" + enc.EncodeToString(raw[:10]) + base64.RawURLEncoding.EncodeToString(raw[10:])
	sum := crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli))
	return body + enc.EncodeToString([]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
}

// TestForgedKeysBudgetPerClient: forged keys that pass the public check cost
// a Redis lookup each only within the client's budget (20, then one a
// second); behind a trusted proxy the budget is the forwarded client's, so
// another client behind it still gets its lookups; from an untrusted peer
// X-Forwarded-For changes nothing.
func TestForgedKeysBudgetPerClient(t *testing.T) {
	const forged = 200
	poll := "/v1/requests/01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a"
	for _, c := range []struct {
		name    string
		trusted []string
		xff     func(i int) string
		most    int
	}{
		{"one client", nil, func(int) string { return "" }, 25},
		{"untrusted forwarding", nil, func(i int) string { return fmt.Sprintf("198.51.100.%d", i%250) }, 25},
		{"clients behind a trusted proxy", []string{"0.0.0.0"}, func(i int) string { return fmt.Sprintf("198.51.100.%d, 0.0.0.0", i%10) }, 10 * 25},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(o *httpapi.Options) { o.TrustedProxies = c.trusted })
			before := e.m.CommandCount()
			for i := range forged {
				hdr := []string{"Authorization", "Bearer " + forgedKey()}
				if x := c.xff(i); x != "" {
					hdr = append(hdr, "X-Forwarded-For", x)
				}
				if r := e.call("GET", poll, "", hdr...); r.code != 401 {
					t.Fatalf("forged key: %d %s", r.code, r.body)
				}
			}
			n := e.m.CommandCount() - before
			t.Logf("%d forged keys: %d Redis commands", forged, n)
			if n > c.most || c.trusted != nil && n < 10*20 {
				t.Fatalf("%d forged keys cost %d Redis commands, want at most %d (and each forwarded client its burst)", forged, n, c.most)
			}
		})
	}
}
