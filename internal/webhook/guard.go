package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Resolver looks host names up; *net.Resolver is one. Tests inject their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard decides which endpoint URLs and addresses deliveries may reach: https
// only, and only public addresses, unless AllowHTTP / AllowPrivate lift that
// (webhooks.allow_http, webhooks.allow_private). It checks a URL at
// registration, and at delivery it checks again every address it is about to
// dial, after its own resolution, so that a name that resolves to a public
// address at registration and to an internal one later (DNS rebinding) gets
// nowhere. Deliveries dial only through Guard.DialContext.
type Guard struct {
	AllowHTTP    bool
	AllowPrivate bool
	// Resolver resolves host names. default: net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds one TCP connect. default: 5s.
	DialTimeout time.Duration
}

// registrationLookupTimeout bounds the name lookup of a registration.
const registrationLookupTimeout = 5 * time.Second

// ErrForbiddenAddress is the cause of a refused dial.
var ErrForbiddenAddress = errors.New("address not allowed for webhooks (loopback, private, link-local or otherwise internal)")

// blocked are the internal ranges that the netip predicates do not cover.
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated), :: and ::1
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: may reach any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001::/32"),       // Teredo: embeds an IPv4 address
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds an IPv4 address
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
}

// Forbidden reports whether a is an address deliveries must not reach by
// default: loopback, private (RFC 1918, fc00::/7), link-local (169.254/16,
// fe80::/10), unspecified, multicast, carrier-grade NAT, reserved and
// documentation ranges, and IPv6 forms that embed an IPv4 address (mapped,
// NAT64, 6to4, Teredo).
func Forbidden(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range blocked {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func urlError(format string, args ...any) error {
	return &domain.Error{Code: domain.ValidationFailed, Message: "The webhook URL is not allowed.",
		Fields: []domain.FieldError{{Field: "url", Message: fmt.Sprintf(format, args...)}}}
}

// CheckURL checks an endpoint URL at registration (its syntax was validated by
// wire.DecodeWebhook): VALIDATION_FAILED naming "url" when the scheme or any
// address the host resolves to is not allowed, or when it does not resolve.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return urlError("is not a valid URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && g.AllowHTTP:
	default:
		return urlError("must use https")
	}
	if g.AllowPrivate {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, registrationLookupTimeout)
	defer cancel()
	addrs, err := g.resolve(ctx, u.Hostname())
	if err != nil {
		return urlError("host %q does not resolve", u.Hostname())
	}
	for _, a := range addrs {
		if Forbidden(a) {
			return urlError("host %q resolves to a loopback, private, link-local or otherwise internal address", u.Hostname())
		}
	}
	return nil
}

func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	r := g.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no address for %s", host)
	}
	return addrs, nil
}

// DialContext is the delivery transport's dialer: it resolves the host itself,
// refuses it if any of its addresses is forbidden, and dials the checked
// addresses (never the name again), with a socket Control hook that checks the
// address actually connected to as a last line.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", portStr)
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if !g.AllowPrivate {
		for _, a := range addrs {
			if Forbidden(a) {
				return nil, fmt.Errorf("dial %s: %w", host, ErrForbiddenAddress)
			}
		}
	}
	to := g.DialTimeout
	if to <= 0 {
		to = 5 * time.Second
	}
	d := net.Dialer{Timeout: to, Control: g.control}
	var lastErr error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, ErrForbiddenAddress)
	}
	if Forbidden(ap.Addr()) {
		return fmt.Errorf("dial %s: %w", address, ErrForbiddenAddress)
	}
	return nil
}
