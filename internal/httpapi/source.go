package httpapi

import (
	"bytes"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// parseProxies reads http.trusted_proxies (validated by config): addresses
// and CIDR ranges.
func parseProxies(list []string) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range list {
		if strings.Contains(a, "/") {
			if p, err := netip.ParsePrefix(a); err == nil {
				out = append(out, p.Masked())
			}
			continue
		}
		if ip, err := netip.ParseAddr(a); err == nil {
			out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
		}
	}
	return out
}

func (s *Server) trusted(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range s.proxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// clientAddr is the address of the caller: the connection's peer, or, when
// that is a trusted proxy, the nearest address in X-Forwarded-For that is
// not one (the entries before it are the client's to write). The zero Addr
// when it cannot be told.
func (s *Server) clientAddr(c *fiber.Ctx) netip.Addr {
	ip, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	ip = ip.Unmap()
	if len(s.proxies) == 0 || !s.trusted(ip) {
		return ip
	}
	xff := c.Request().Header.Peek(fiber.HeaderXForwardedFor)
	for len(xff) > 0 {
		var entry []byte
		if i := bytes.LastIndexByte(xff, ','); i >= 0 {
			entry, xff = xff[i+1:], xff[:i]
		} else {
			entry, xff = xff, nil
		}
		a, err := netip.ParseAddr(string(bytes.TrimSpace(entry)))
		if err != nil {
			return ip // a malformed chain: the proxy is all that is known
		}
		if a = a.Unmap(); !s.trusted(a) {
			return a
		}
	}
	return ip
}
