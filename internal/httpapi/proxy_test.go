package httpapi_test

import (
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/httpapi"
)

// TestForwardedHeadersOnlyFromTrustedProxies: X-Forwarded-Proto and
// X-Forwarded-Host shape Location only on a connection from
// http.trusted_proxies, and the scheme is only ever http or https.
func TestForwardedHeadersOnlyFromTrustedProxies(t *testing.T) {
	const evilProto = "javascript:alert(1)//"
	for _, c := range []struct {
		name    string
		trusted []string // app.Test's connection comes from 0.0.0.0
		hdr     []string
		prefix  string
	}{
		{"untrusted proto", nil, []string{"X-Forwarded-Proto", "https"}, "http://api.example/v1/requests/"},
		{"untrusted host", nil, []string{"X-Forwarded-Host", "evil.example"}, "http://api.example/v1/requests/"},
		{"untrusted javascript", nil, []string{"X-Forwarded-Proto", evilProto}, "http://api.example/v1/requests/"},
		{"trusted https", []string{"0.0.0.0"}, []string{"X-Forwarded-Proto", "https", "X-Forwarded-Host", "status.example"}, "https://status.example/v1/requests/"},
		{"trusted range", []string{"0.0.0.0/8"}, []string{"X-Forwarded-Proto", "HTTPS"}, "https://api.example/v1/requests/"},
		{"trusted javascript", []string{"0.0.0.0"}, []string{"X-Forwarded-Proto", evilProto}, "http://api.example/v1/requests/"},
		{"trusted url scheme", []string{"0.0.0.0"}, []string{"X-Url-Scheme", "data:text/html,x"}, "http://api.example/v1/requests/"},
		{"other proxy", []string{"10.0.0.1"}, []string{"X-Forwarded-Proto", "https"}, "http://api.example/v1/requests/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(o *httpapi.Options) { o.TrustedProxies = c.trusted })
			hdr := append([]string{"Host", "api.example"}, c.hdr...)
			r := e.create("acme-rw", `{"type":"x"}`, hdr...)
			loc := r.h.Get("Location")
			if r.code != 202 || len(loc) <= len(c.prefix) || loc[:len(c.prefix)] != c.prefix {
				t.Fatalf("%d Location %q, want %s<id>", r.code, loc, c.prefix)
			}
		})
	}
}
