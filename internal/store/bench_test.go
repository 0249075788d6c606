package store_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/audit"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

func loadReference(tb testing.TB) (domain.CreateInput, domain.ProgressInput, domain.CompleteInput) {
	tb.Helper()
	ref := testenv.ReferenceRequest(tb)
	raw := struct{ Create, Processing, Complete json.RawMessage }{ref["create"], ref["processing"], ref["complete"]}
	lim := domain.Limits{ContextBytes: 4096, ResultBytes: 16384}
	c, err := wire.DecodeCreate(raw.Create, lim)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := wire.DecodeProgress(raw.Processing)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := wire.DecodeComplete(raw.Complete, lim)
	if err != nil {
		tb.Fatal(err)
	}
	return c, p, d
}

// benchStore is a store on the test binary's real redis-server, with the default
// options (and the real clock), script calls autopipelined as serve makes them.
func benchStore(b *testing.B) *store.Store {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b), PoolSize: 64})
	b.Cleanup(func() { rdb.Close() })
	s, err := store.New(rdb, store.Options{Prefix: testenv.Isolate(b), Retention: 720 * time.Hour, AutoPipeline: true})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkStore measures the store's operations on a real redis-server with the
// reference request, run in parallel (-cpu sets the goroutines).
//
//	go test -run XXX -bench BenchmarkStore -benchtime 3s ./internal/store/
func BenchmarkStore(b *testing.B) {
	in, prog, done := loadReference(b)
	b.Run("Create", func(b *testing.B) {
		s := benchStore(b)
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Complete", func(b *testing.B) {
		s := benchStore(b)
		ids := make([]string, b.N)
		for i := range ids {
			r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in})
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = r.ID
		}
		var next atomic.Int64
		b.ResetTimer()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := ids[next.Add(1)-1]
				if _, err := s.Complete(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, ID: id}, done); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Poll", func(b *testing.B) {
		s := benchStore(b)
		const n = 1000
		ids := make([]string, n)
		for i := range ids {
			r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.MarkProcessing(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, ID: r.ID}, prog); err != nil {
				b.Fatal(err)
			}
			ids[i] = r.ID
		}
		callers := []string{"key_a", "key_b", "key_c", "key_d"}
		var next atomic.Int64
		b.ResetTimer()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				// four callers per request, as a few clients of one request would be;
				// an early poll (429) is an answer too: the same read, no write
				i := next.Add(1)
				caller := callers[i%4]
				if _, _, err := pollOf(s, "bench", ids[(i/4)%n], caller); err != nil && domain.ErrorCode(err) != domain.PolledTooEarly {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Read", func(b *testing.B) { // the same read without pacing (events route)
		s := benchStore(b)
		r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Events(ctx, "bench", r.ID); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("RawGET", func(b *testing.B) { // the floor: one GET of the same record
		s := benchStore(b)
		r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in})
		if err != nil {
			b.Fatal(err)
		}
		key := s.Prefix() + ":{bench}:r:" + r.ID
		b.ResetTimer()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Client().Get(ctx, key).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// discardSink is an audit sink that keeps nothing, so that a benchmark measures
// what the audit trail costs the service and Redis, not a disk.
type discardSink struct{ lines atomic.Int64 }

func (d *discardSink) Write(_ context.Context, lines [][]byte) error {
	d.lines.Add(int64(len(lines)))
	return nil
}
func (d *discardSink) Close() error { return nil }

// BenchmarkLifecycle measures one reference request's whole life (create,
// processing, complete) on a real redis-server, in parallel, without the audit
// trail and with it (the entries recorded by the scripts, and a drainer
// writing them to a sink that discards them, as each serve replica runs one),
// so that the two are compared in one run:
//
//	go test -run XXX -bench BenchmarkLifecycle -count 5 ./internal/store/
func BenchmarkLifecycle(b *testing.B) {
	in, prog, done := loadReference(b)
	for _, on := range []bool{false, true} {
		name := "audit=off"
		if on {
			name = "audit=on"
		}
		b.Run(name, func(b *testing.B) {
			rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b), PoolSize: 64})
			b.Cleanup(func() { rdb.Close() })
			o := store.Options{Prefix: testenv.Isolate(b), Retention: 720 * time.Hour, AutoPipeline: true}
			if on {
				o.AuditBacklog = 100000
			}
			s, err := store.New(rdb, o)
			if err != nil {
				b.Fatal(err)
			}
			sink := &discardSink{}
			if on {
				d, err := audit.NewDrainer(s, audit.Options{Sink: sink, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				s.OnAudit(d.Nudge)
				dctx, cancel := context.WithCancel(ctx)
				stopped := make(chan struct{})
				go func() { defer close(stopped); d.Run(dctx) }()
				b.Cleanup(func() { cancel(); <-stopped })
			}
			b.ResetTimer()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in})
					if err != nil {
						b.Error(err)
						return
					}
					p := domain.TransitionParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, ID: r.ID}
					if _, err := s.MarkProcessing(ctx, p, prog); err != nil {
						b.Error(err)
						return
					}
					if _, err := s.Complete(ctx, p, done); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			if on {
				b.ReportMetric(float64(sink.lines.Load())/float64(3*b.N), "written/event")
			}
		})
	}
}
