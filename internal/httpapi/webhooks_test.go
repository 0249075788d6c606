package httpapi_test

import (
	"context"
	"encoding/base64"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

type tableResolver map[string]string

func (r tableResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// webhookEnv is a server with the webhook routes on, with the default guard
// (https and public addresses only) and a resolver that knows a few names.
func webhookEnv(t testing.TB) *env {
	t.Helper()
	sealer, err := webhook.NewSealer([]byte("http-test-webhook-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	guard := &webhook.Guard{Resolver: tableResolver{"partner.example": "93.184.216.34", "sneaky.example": "127.0.0.1",
		"metadata.example": "169.254.169.254"}}
	// the routes alone: no dispatcher delivers to these names' addresses
	return newAppEnv(t, func(o *app.Options) { o.HTTP.Webhooks = webhook.NewService(o.Store, guard, sealer, nil) })
}

func TestWebhookRoutes(t *testing.T) {
	e := webhookEnv(t)
	admin := e.as("acme-admin")

	r := e.call("POST", "/v1/webhooks", `{"url":"https://partner.example/hooks","events":["request.failed","request.created","request.failed"],"description":"ledger"}`, admin...)
	if r.code != 201 {
		t.Fatalf("register: %d %s", r.code, r.body)
	}
	m := r.json(t)
	id, _ := m["id"].(string)
	secret, _ := m["secret"].(string)
	if !strings.HasPrefix(id, "ep_") || m["url"] != "https://partner.example/hooks" || m["description"] != "ledger" || m["created_at"] == nil {
		t.Fatalf("answer %s", r.body)
	}
	if evs, _ := m["events"].([]any); len(evs) != 2 || evs[0] != "request.created" || evs[1] != "request.failed" {
		t.Fatalf("events %v", m["events"])
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if !strings.HasPrefix(secret, "whsec_") || err != nil || len(key) < 24 {
		t.Fatalf("secret %q (%d bytes, %v)", secret, len(key), err)
	}
	if loc := r.h.Get("Location"); !strings.HasSuffix(loc, "/v1/webhooks/"+id) {
		t.Fatalf("Location %q", loc)
	}
	if cc := r.h.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q", cc)
	}

	// The secret is shown once: never again through the API, and not in Redis.
	for _, path := range []string{"/v1/webhooks", "/v1/webhooks/" + id} {
		r := e.call("GET", path, "", admin...)
		if r.code != 200 || strings.Contains(string(r.body), "secret") || strings.Contains(string(r.body), secret[6:]) {
			t.Fatalf("GET %s: %d %s", path, r.code, r.body)
		}
	}
	keys, _ := e.rdb.Keys(context.Background(), "*").Result()
	for _, k := range keys {
		dump, _ := e.rdb.Dump(context.Background(), k).Result()
		vals, _ := e.rdb.HGetAll(context.Background(), k).Result()
		for _, v := range append([]string{dump}, mapValues(vals)...) {
			if strings.Contains(v, secret[6:]) || strings.Contains(v, string(key)) {
				t.Fatalf("the secret is readable in Redis key %s", k)
			}
		}
	}

	l := e.call("GET", "/v1/webhooks", "", admin...).json(t)
	if items, _ := l["items"].([]any); len(items) != 1 {
		t.Fatalf("list %v", l)
	}
	d := e.call("GET", "/v1/webhooks/"+id+"/deliveries", "", admin...)
	if d.code != 200 || string(d.body) != `{"items":[]}` {
		t.Fatalf("deliveries %d %s", d.code, d.body)
	}
	// Defaults: the four terminal events.
	r = e.call("POST", "/v1/webhooks", `{"url":"https://partner.example/other"}`, admin...)
	if evs, _ := r.json(t)["events"].([]any); r.code != 201 || len(evs) != 4 || evs[0] != "request.succeeded" || evs[3] != "request.expired" {
		t.Fatalf("default events: %d %s", r.code, r.body)
	}

	if r := e.call("DELETE", "/v1/webhooks/"+id, "", admin...); r.code != 204 {
		t.Fatalf("delete %d %s", r.code, r.body)
	}
	wantProblem(t, e.call("GET", "/v1/webhooks/"+id, "", admin...), 404, "NOT_FOUND")
	wantProblem(t, e.call("DELETE", "/v1/webhooks/"+id, "", admin...), 404, "NOT_FOUND")
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestWebhookValidation(t *testing.T) {
	e := webhookEnv(t)
	admin := e.as("acme-admin")
	for _, c := range []struct {
		name, body, field string
	}{
		{"NoURL", `{}`, "url"},
		{"EmptyURL", `{"url":""}`, "url"},
		{"NotAURL", `{"url":"partner.example/hooks"}`, "url"},
		{"FTP", `{"url":"ftp://partner.example/hooks"}`, "url"},
		{"HTTPNotAllowed", `{"url":"http://partner.example/hooks"}`, "url"},
		{"Credentials", `{"url":"https://u:p@partner.example/hooks"}`, "url"},
		{"Loopback", `{"url":"https://127.0.0.1/hooks"}`, "url"},
		{"LoopbackV6", `{"url":"https://[::1]/hooks"}`, "url"},
		{"Private10", `{"url":"https://10.1.2.3/hooks"}`, "url"},
		{"Private172", `{"url":"https://172.16.0.9/hooks"}`, "url"},
		{"Private192", `{"url":"https://192.168.0.9/hooks"}`, "url"},
		{"LinkLocal", `{"url":"https://169.254.169.254/latest"}`, "url"},
		{"LinkLocalV6", `{"url":"https://[fe80::1]/hooks"}`, "url"},
		{"NameToLoopback", `{"url":"https://sneaky.example/hooks"}`, "url"},
		{"NameToMetadata", `{"url":"https://metadata.example/"}`, "url"},
		{"DoesNotResolve", `{"url":"https://nowhere.example/"}`, "url"},
		{"TooLong", `{"url":"https://partner.example/` + strings.Repeat("a", 2048) + `"}`, "url"},
		{"UnknownEvent", `{"url":"https://partner.example/","events":["request.updated"]}`, "events"},
		{"NoEvents", `{"url":"https://partner.example/","events":[]}`, "events"},
		{"EventsNotList", `{"url":"https://partner.example/","events":"request.failed"}`, "events"},
		{"LongDescription", `{"url":"https://partner.example/","description":"` + strings.Repeat("d", 257) + `"}`, "description"},
		{"UnknownMember", `{"url":"https://partner.example/","secret":"whsec_mine"}`, "secret"},
		{"NotAnObject", `[1]`, "body"},
		{"Empty", ``, "body"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/v1/webhooks", c.body, append(admin, "Content-Type", "application/json")...)
			m := wantProblem(t, r, 400, "VALIDATION_FAILED")
			errs, _ := m["errors"].([]any)
			if len(errs) == 0 || errs[0].(map[string]any)["field"] != c.field {
				t.Fatalf("errors %v, want field %s", m["errors"], c.field)
			}
		})
	}
	wantProblem(t, e.call("POST", "/v1/webhooks", `url=x`, append(admin, "Content-Type", "text/plain")...), 415, "UNSUPPORTED_MEDIA_TYPE")
}

func TestWebhookAccess(t *testing.T) {
	e := webhookEnv(t)
	r := e.call("POST", "/v1/webhooks", `{"url":"https://partner.example/h"}`, e.as("acme-admin")...)
	if r.code != 201 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	id := r.json(t)["id"].(string)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/webhooks", `{"url":"https://partner.example/h"}`},
		{"GET", "/v1/webhooks", ""},
		{"GET", "/v1/webhooks/" + id, ""},
		{"DELETE", "/v1/webhooks/" + id, ""},
		{"GET", "/v1/webhooks/" + id + "/deliveries", ""},
	} {
		wantProblem(t, e.call(c.method, c.path, c.body), 401, "UNAUTHENTICATED")
		wantProblem(t, e.call(c.method, c.path, c.body, e.as("acme-rw")...), 403, "FORBIDDEN")
	}
	// Another tenant's endpoint, an unknown one and a malformed id are the same 404
	// as a request's.
	var bodies []string
	add := func(r resp) {
		t.Helper()
		m := wantProblem(t, r, 404, "NOT_FOUND")
		s := strings.Replace(string(r.body), `"instance":`+mustQuote(m["instance"].(string)), `"instance":""`, 1)
		bodies = append(bodies, strings.Replace(s, `"request_id":`+mustQuote(m["request_id"].(string)), `"request_id":""`, 1))
	}
	add(e.call("GET", "/v1/requests/01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", "", e.as("acme-rw")...))
	for _, wid := range []string{id, "ep_aaaaaaaaaaaaaaaaaaaaaaaa", "nope", "ep_" + strings.Repeat("A", 24)} {
		add(e.call("GET", "/v1/webhooks/"+wid, "", e.as("globex-rw")...))
		add(e.call("GET", "/v1/webhooks/"+wid+"/deliveries", "", e.as("globex-rw")...))
		add(e.call("DELETE", "/v1/webhooks/"+wid, "", e.as("globex-rw")...))
	}
	for i, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("404 body %d differs:\n%s\n%s", i, b, bodies[0])
		}
	}
	if l := e.call("GET", "/v1/webhooks", "", e.as("globex-rw")...); l.code != 200 || string(l.body) != `{"items":[]}` {
		t.Fatalf("globex list %d %s", l.code, l.body)
	}
	// The endpoint survived globex's attempts.
	if r := e.call("GET", "/v1/webhooks/"+id, "", e.as("acme-admin")...); r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	// A frozen tenant may not register or read endpoints (reads and creates are refused).
	if err := e.st.SetFrozen(context.Background(), "acme", true); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, e.call("GET", "/v1/webhooks", "", e.as("acme-admin")...), 403, "TENANT_FROZEN")
	wantProblem(t, e.call("POST", "/v1/webhooks", `{"url":"https://partner.example/h"}`, e.as("acme-admin")...), 403, "TENANT_FROZEN")
}

// TestWebhookRoutesOff: without a Webhooks service (webhooks.enabled false) the
// routes do not exist.
func TestWebhookRoutesOff(t *testing.T) {
	e := newEnv(t, nil)
	wantProblem(t, e.call("GET", "/v1/webhooks", "", e.as("acme-admin")...), 404, "NOT_FOUND")
}

func TestWebhookEndpointLimit(t *testing.T) {
	e := webhookEnv(t)
	for i := 0; i < webhook.MaxEndpoints; i++ {
		if r := e.call("POST", "/v1/webhooks", `{"url":"https://partner.example/h"}`, e.as("acme-admin")...); r.code != 201 {
			t.Fatalf("%d: %d %s", i, r.code, r.body)
		}
	}
	wantProblem(t, e.call("POST", "/v1/webhooks", `{"url":"https://partner.example/h"}`, e.as("acme-admin")...), 400, "VALIDATION_FAILED")
}
