package wire

import (
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// TestWebhookURLPort: a port outside 1..65535, or an empty one after the
// colon, is refused naming url; a URL with no port or a valid one passes; and
// no message claims that only https is allowed (webhooks.allow_http may allow
// http: the guard says so when it does not).
func TestWebhookURLPort(t *testing.T) {
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"https://h.example/", true},
		{"https://h.example:1/", true},
		{"https://h.example:65535/x", true},
		{"http://[::1]:8080/x", true},
		{"https://h.example:0/", false},
		{"https://h.example:99999/", false},
		{"https://h.example:65536/", false},
		{"https://h.example:0443/", false},
		{"https://h.example:/", false},
		{"https://[::1]:/", false},
		{"ftp://h.example/", false},
	} {
		_, err := DecodeWebhook([]byte(`{"url":` + quote(c.url) + `}`))
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.url, err)
			}
			continue
		}
		e, ok := err.(*domain.Error)
		if !ok || e.Code != domain.ValidationFailed || len(e.Fields) != 1 || e.Fields[0].Field != "url" {
			t.Errorf("%s: %#v, want VALIDATION_FAILED naming url", c.url, err)
			continue
		}
		if strings.Contains(e.Fields[0].Message, "https URL") && !strings.Contains(e.Fields[0].Message, "http or https") {
			t.Errorf("%s: %q says https only", c.url, e.Fields[0].Message)
		}
	}
}

func quote(s string) string { return `"` + s + `"` }
