package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/asyncstatus/asyncstatus/internal/audit"
	"github.com/asyncstatus/asyncstatus/internal/config"
)

// auditOptions are the options of this replica's audit drainer (every replica
// runs one) with the sink audit.sink names: the log output logOut, a file, or
// none (nil options: no drainer).
func auditOptions(cfg config.Config, logOut io.Writer, log *slog.Logger) (*audit.Options, error) {
	a := cfg.Audit
	var sink audit.Sink
	switch a.Sink {
	case "none":
		log.Warn("audit trail off (audit.sink none): transitions are not recorded beyond their records' retention")
		return nil, nil
	case "file":
		sink = audit.NewFileSink(a.File, a.FileMaxBytes, a.FileKeep)
	case "log":
		sink = audit.NewLogSink(logOut)
	default:
		return nil, fmt.Errorf("audit.sink: must be log, file or none, got %q", a.Sink)
	}
	return &audit.Options{Sink: sink, Bound: int64(a.MaxBacklog), ClaimAfter: a.ClaimAfter, Log: log}, nil
}
