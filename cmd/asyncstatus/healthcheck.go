package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// cmdHealthcheck asks a running service whether it is ready: it GETs url
// (default: /readyz on the port of this configuration's http.addr, on
// loopback) and succeeds on 200 alone. It exists for container health checks:
// the image is FROM scratch, with no shell and no curl to run one
// (deploy/compose/compose.yaml).
func cmdHealthcheck(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var url *string
	var timeout *time.Duration
	fs, cfgPath, err := flags("healthcheck", args, io.Discard, func(fs *flag.FlagSet) {
		url = fs.String("url", "", "URL to GET (default: http://127.0.0.1:<port of http.addr>/readyz)")
		timeout = fs.Duration("timeout", 2*time.Second, "give up after this long")
	})
	if err != nil {
		return err
	}
	if err := positional("healthcheck", fs, 0, ""); err != nil {
		return err
	}
	target := *url
	if target == "" {
		cfg, err := loadConfig(cfgPath, getenv)
		if err != nil {
			return err
		}
		host, port, err := net.SplitHostPort(cfg.HTTP.Addr)
		if err != nil {
			return fmt.Errorf("healthcheck: http.addr %q: %w", cfg.HTTP.Addr, err)
		}
		// A wildcard listener is reached on loopback; a specific address
		// only on itself.
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = "127.0.0.1"
		}
		target = "http://" + net.JoinHostPort(host, port) + "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return usageError{fmt.Sprintf("healthcheck: --url: %v", err)}
	}
	resp, err := http.DefaultTransport.RoundTrip(req) // no redirects, no proxy from the environment
	if err != nil {
		return fmt.Errorf("healthcheck: GET %s: %w", target, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s: %s", target, resp.Status)
	}
	fmt.Fprintf(stdout, "ok: GET %s: %s\n", target, resp.Status)
	return nil
}
