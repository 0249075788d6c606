package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/console"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
)

// consoleOptions binds the operator console's listener (docs/reference.md §14)
// on console.addr; nil when console.addr is "" or "off". Its live views are
// woken by a notification hub: serve's own, or, when waiting is off
// (wait.max_waiters 0), one of the console's.
func consoleOptions(cfg config.Config, m *metrics.Metrics, log *slog.Logger) (*app.ConsoleOptions, error) {
	if !cfg.Console.Enabled() {
		return nil, nil
	}
	masked, err := cfg.Masked().YAML()
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Console.Addr)
	if err != nil {
		return nil, fmt.Errorf("console: listen on %s (console.addr): %w", cfg.Console.Addr, err)
	}
	log.Info("console listening", "addr", ln.Addr().String(), "url", consoleURL(ln.Addr()))
	return &app.ConsoleOptions{Options: console.Options{SessionTTL: cfg.Console.SessionTTL, Config: masked,
		Gatherer: m.Registry(), Log: log}, Listener: ln, Live: true}, nil
}

// consoleBanner is what a developer on the embedded store needs to reach the
// console: its URL and a one-time sign-in link for the demo key (demoKeyID).
func consoleBanner(ctx context.Context, c *console.Server, ln net.Listener, demoKeyID string) (string, error) {
	base := consoleURL(ln.Addr())
	link, err := c.SignInLink(ctx, base, demoKeyID)
	if err != nil {
		return "", fmt.Errorf("console: sign-in link: %w", err)
	}
	return fmt.Sprintf("  Operator console: %s/\n  One-click sign-in for the demo key (works once, within 15 minutes):\n\n%s\n\n", base, link), nil
}

// consoleURL is the URL a browser on this machine reaches the listener at.
func consoleURL(a net.Addr) string {
	host, port, _ := net.SplitHostPort(a.String())
	if ip := net.ParseIP(host); host == "" || ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
