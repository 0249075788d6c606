package webhook_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// fakeResolver answers from a table; a name it does not know does not resolve.
// Its answers can change between calls (DNS rebinding).
type fakeResolver struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
	calls atomic.Int64
}

func newResolver(kv ...string) *fakeResolver {
	r := &fakeResolver{names: map[string][]netip.Addr{}}
	for i := 0; i+1 < len(kv); i += 2 {
		r.set(kv[i], kv[i+1])
	}
	return r
}

func (r *fakeResolver) set(name string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[name] = nil
	for _, a := range addrs {
		r.names[name] = append(r.names[name], netip.MustParseAddr(a))
	}
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestForbidden(t *testing.T) {
	for _, c := range []struct {
		addr      string
		forbidden bool
	}{
		{"127.0.0.1", true}, {"127.8.9.10", true}, {"::1", true},
		{"10.0.0.1", true}, {"10.255.255.255", true}, {"172.16.0.1", true}, {"172.31.255.254", true}, {"192.168.1.1", true},
		{"169.254.169.254", true}, {"fe80::1", true}, {"fe80::1%eth0", true},
		{"fc00::1", true}, {"fd12:3456::1", true},
		{"0.0.0.0", true}, {"::", true}, {"100.64.0.1", true}, {"100.127.255.254", true},
		{"224.0.0.1", true}, {"ff02::1", true}, {"255.255.255.255", true}, {"240.0.0.1", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:10.0.0.1", true}, {"::ffff:169.254.169.254", true},
		{"::127.0.0.1", true}, {"64:ff9b::a00:1", true}, {"2002:7f00:1::", true}, {"2001:db8::1", true},
		{"192.0.2.10", true}, {"198.18.0.1", true},
		{"93.184.216.34", false}, {"8.8.8.8", false}, {"1.1.1.1", false}, {"172.32.0.1", false}, {"100.128.0.1", false},
		{"2606:4700:4700::1111", false}, {"::ffff:93.184.216.34", false},
	} {
		if got := webhook.Forbidden(netip.MustParseAddr(c.addr)); got != c.forbidden {
			t.Errorf("Forbidden(%s) = %v, want %v", c.addr, got, c.forbidden)
		}
	}
}

// TestCheckURL is the guard at registration: https only, and no name or literal
// that resolves to an internal address, unless the settings allow it.
func TestCheckURL(t *testing.T) {
	res := newResolver("public.example", "93.184.216.34", "loopback.example", "127.0.0.1",
		"private.example", "10.1.2.3", "metadata.example", "169.254.169.254",
		"mixed.example", "93.184.216.34", "v6local.example", "fe80::1")
	res.set("mixed.example", "93.184.216.34", "192.168.0.10")
	strict := &webhook.Guard{Resolver: res}
	dev := &webhook.Guard{Resolver: res, AllowHTTP: true}
	open := &webhook.Guard{Resolver: res, AllowHTTP: true, AllowPrivate: true}
	for _, c := range []struct {
		name  string
		g     *webhook.Guard
		url   string
		allow bool
	}{
		{"PublicHTTPS", strict, "https://public.example/hook", true},
		{"PublicIPLiteral", strict, "https://93.184.216.34/hook", true},
		{"HTTPRefused", strict, "http://public.example/hook", false},
		{"HTTPAllowed", dev, "http://public.example/hook", true},
		{"Loopback127", strict, "https://127.0.0.1/hook", false},
		{"LoopbackV6", strict, "https://[::1]:8443/hook", false},
		{"Private10", strict, "https://10.0.0.8/hook", false},
		{"Private172", strict, "https://172.16.5.4/hook", false},
		{"Private192", strict, "https://192.168.1.20/hook", false},
		{"Metadata", strict, "https://169.254.169.254/latest/meta-data", false},
		{"LinkLocalV6", strict, "https://[fe80::1]/hook", false},
		{"MappedV4", strict, "https://[::ffff:127.0.0.1]/hook", false},
		{"NameToLoopback", strict, "https://loopback.example/hook", false},
		{"NameToPrivate", strict, "https://private.example/hook", false},
		{"NameToMetadata", strict, "https://metadata.example/hook", false},
		{"NameToLinkLocalV6", strict, "https://v6local.example/hook", false},
		{"OneOfManyPrivate", strict, "https://mixed.example/hook", false},
		{"DoesNotResolve", strict, "https://nowhere.example/hook", false},
		{"PrivateAllowedForDev", open, "http://127.0.0.1:9999/hook", true},
		{"PrivateStillNeedsHTTPS", &webhook.Guard{Resolver: res, AllowPrivate: true}, "http://127.0.0.1/hook", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.g.CheckURL(context.Background(), c.url)
			if c.allow {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != domain.ValidationFailed || len(de.Fields) != 1 || de.Fields[0].Field != "url" {
				t.Fatalf("want VALIDATION_FAILED naming url, got %v", err)
			}
		})
	}
}

// TestDialRefusesInternalAddresses is the guard at delivery: whatever the
// registration found, the dialer resolves again and never connects to an
// internal address, neither by name nor by literal.
func TestDialRefusesInternalAddresses(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	res := newResolver("rebind.example", "127.0.0.1", "inside.example", "10.0.0.1")
	g := &webhook.Guard{Resolver: res, AllowHTTP: true}
	client := &http.Client{Transport: &http.Transport{DialContext: g.DialContext, Proxy: nil}}
	for _, host := range []string{"127.0.0.1", "rebind.example", "[::1]", "localhost"} {
		res.set("localhost", "127.0.0.1", "::1")
		_, err := client.Get("http://" + host + ":" + port + "/")
		if err == nil || !errors.Is(err, webhook.ErrForbiddenAddress) {
			t.Errorf("%s: want ErrForbiddenAddress, got %v", host, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the receiver on loopback was reached %d times", n)
	}
	// The same dialer with allow_private reaches it.
	open := &webhook.Guard{Resolver: res, AllowHTTP: true, AllowPrivate: true}
	client = &http.Client{Transport: &http.Transport{DialContext: open.DialContext, Proxy: nil}}
	res.set("rebind.example", "127.0.0.1")
	r, err := client.Get("http://rebind.example:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if hits.Load() != 1 {
		t.Fatalf("hits %d, want 1", hits.Load())
	}
}

func TestSealer(t *testing.T) {
	s, err := webhook.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if key, err := webhook.SecretKey(secret); err != nil || len(key) < 24 || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("secret %q: %d bytes, %v", secret, len(key), err)
	}
	sealed, err := s.Seal("acme", "ep_1", secret)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("sealed form contains the secret")
	}
	if got, err := s.Open("acme", "ep_1", sealed); err != nil || got != secret {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := s.Open("globex", "ep_1", sealed); err == nil {
		t.Fatal("a sealed secret opened for another tenant")
	}
	if _, err := s.Open("acme", "ep_2", sealed); err == nil {
		t.Fatal("a sealed secret opened for another endpoint")
	}
	other, _ := webhook.NewSealer([]byte("another key, another key, another"))
	if _, err := other.Open("acme", "ep_1", sealed); err == nil {
		t.Fatal("a sealed secret opened under another key")
	}
}

// TestSealerRotation: after webhooks.secret_key changes with the old key kept in
// webhooks.previous_secret_keys, old secrets still open; Reseal moves them to
// the new key (and leaves secrets already under it as they are), after which
// the old key can go.
func TestSealerRotation(t *testing.T) {
	oldKey, newKey := []byte("the old key, the old key, the old"), []byte("the new key, the new key, the new")
	before, _ := webhook.NewSealer(oldKey)
	secret, _ := webhook.NewSecret()
	sealed, err := before.Seal("acme", "ep_1", secret)
	if err != nil {
		t.Fatal(err)
	}

	rotating, err := webhook.NewSealer(newKey, []byte("an unrelated key, an unrelated ke"), oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotating.Open("acme", "ep_1", sealed); err != nil || got != secret {
		t.Fatalf("open under a previous key: %q %v", got, err)
	}
	if _, err := rotating.Open("globex", "ep_1", sealed); err == nil {
		t.Fatal("a previous key opened another tenant's secret")
	}
	resealed, changed, err := rotating.Reseal("acme", "ep_1", sealed)
	if err != nil || !changed || resealed == sealed {
		t.Fatalf("reseal: changed %v, same %v, %v", changed, resealed == sealed, err)
	}
	after, _ := webhook.NewSealer(newKey)
	if got, err := after.Open("acme", "ep_1", resealed); err != nil || got != secret {
		t.Fatalf("the resealed secret under the new key alone: %q %v", got, err)
	}
	if _, err := before.Open("acme", "ep_1", resealed); err == nil {
		t.Fatal("the resealed secret still opens under the old key")
	}
	if again, changed, err := rotating.Reseal("acme", "ep_1", resealed); err != nil || changed || again != resealed {
		t.Fatalf("reseal of a current secret: changed %v, same %v, %v", changed, again == resealed, err)
	}
	if _, err := after.Open("acme", "ep_1", sealed); err == nil {
		t.Fatal("the old sealed form opened without the old key")
	}
	if _, _, err := after.Reseal("acme", "ep_1", sealed); err == nil {
		t.Fatal("reseal without the key that sealed it did not fail")
	}
	if _, err := webhook.NewSealer(newKey, nil); err == nil {
		t.Fatal("an empty previous key was accepted")
	}
}
