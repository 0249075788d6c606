package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/asyncstatus/asyncstatus/internal/audit"
	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/store"
)

// startAudit starts this replica's audit drainer (every replica runs one) with
// the sink audit.sink names: the log output logOut, a file, or none. It returns
// the sink's state for /readyz and a function that stops the drainer after one
// last pass and closes the sink. The drainer does not stop with ctx: it goes on
// while the requests in flight finish, so that their entries are written too.
func startAudit(ctx context.Context, cfg config.Config, st *store.Store, logOut io.Writer, log *slog.Logger, m *metrics.Metrics) (func() (bool, string), func(), error) {
	a := cfg.Audit
	var sink audit.Sink
	switch a.Sink {
	case "none":
		log.Warn("audit trail off (audit.sink none): transitions are not recorded beyond their records' retention")
		return nil, func() {}, nil
	case "file":
		sink = audit.NewFileSink(a.File, a.FileMaxBytes, a.FileKeep)
	case "log":
		sink = audit.NewLogSink(logOut)
	default:
		return nil, nil, fmt.Errorf("audit.sink: must be log, file or none, got %q", a.Sink)
	}
	d, err := audit.NewDrainer(st, audit.Options{Sink: sink, Bound: int64(a.MaxBacklog), ClaimAfter: a.ClaimAfter, Log: log})
	if err != nil {
		return nil, nil, err
	}
	st.OnAudit(d.Nudge)
	m.WatchAudit(func() metrics.AuditStats {
		s := d.Stats()
		return metrics.AuditStats{Written: s.Written, SinkErrors: s.SinkErrors, Dropped: s.Dropped, StoreErrors: s.StoreErrors,
			Backlog: s.Backlog, BacklogMax: s.BacklogMax, Bound: s.Bound, SinkUp: s.SinkUp}
	})
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); d.Run(dctx) }()
	return d.Status, func() {
		cancel()
		<-done
		st.OnAudit(nil)
		m.WatchAudit(nil)
		if err := sink.Close(); err != nil {
			log.Error("audit: close sink", "err", err)
		}
	}, nil
}
