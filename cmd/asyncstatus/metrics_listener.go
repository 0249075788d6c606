package main

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/asyncstatus/asyncstatus/internal/config"
)

// listenMetrics binds metrics.addr, where /metrics is served alone; nil for ""
// (/metrics is then on http.addr). It needs no credential, as on http.addr:
// the address is what keeps it private.
func listenMetrics(cfg config.Config, log *slog.Logger) (net.Listener, error) {
	if cfg.Metrics.Addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Metrics.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (metrics.addr): %w", cfg.Metrics.Addr, err)
	}
	log.Info("metrics listening", "addr", ln.Addr().String())
	return ln, nil
}
