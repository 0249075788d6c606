package store_test

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// processCPU is this process's user+system CPU time so far, in µs.
func processCPU(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// BenchmarkLabelledWrites: a create and a complete of the reference request
// with 2 labels against none, in one run (docs/listing.md, Labels).
func BenchmarkLabelledWrites(b *testing.B) {
	in, _, done := loadReference(b)
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b), PoolSize: 64})
	b.Cleanup(func() { rdb.Close() })
	s, err := store.New(rdb, store.Options{Prefix: testenv.Isolate(b), Retention: 720 * time.Hour, AutoPipeline: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range []int{0, 2} {
		in := in
		if k > 0 {
			in.Labels = "env=prod,team=team-03"
		}
		b.Run(fmt.Sprintf("labels=%d", k), func(b *testing.B) {
			before := redisCPU(b, rdb)
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in})
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := s.Complete(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, ID: r.ID}, done); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric((redisCPU(b, rdb)-before)/float64(b.N), "redis-cpu-µs/op")
		})
	}
}

// BenchmarkLookup100: one lookup of 100 ids against 100 reads of one id each
// (what a client without lookups does), CPU of this process and of Redis.
func BenchmarkLookup100(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b), PoolSize: 16})
	b.Cleanup(func() { rdb.Close() })
	s, err := store.New(rdb, store.Options{Prefix: testenv.Isolate(b), Retention: 720 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	var ids []string
	for range 100 {
		r, _, err := s.Create(ctx, domain.CreateParams{
			Call:  domain.Call{Tenant: "bench", By: "key_b"},
			Input: domain.CreateInput{Type: "x", Context: json.RawMessage(`{"account":"acc_881204","year":2025}`)},
		})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	measure := func(b *testing.B, f func()) {
		rc, pc := redisCPU(b, rdb), processCPU(b)
		for b.Loop() {
			f()
		}
		b.ReportMetric((redisCPU(b, rdb)-rc)/float64(b.N), "redis-cpu-µs/op")
		b.ReportMetric((processCPU(b)-pc)/float64(b.N), "process-cpu-µs/op")
	}
	b.Run("lookup", func(b *testing.B) {
		measure(b, func() {
			p, err := s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "bench", Credential: "key_b"}, IDs: ids})
			if err != nil || len(p.Items) != 100 {
				b.Fatalf("%v %v", len(p.Items), err)
			}
		})
	})
	b.Run("100-polls", func(b *testing.B) {
		measure(b, func() {
			for _, id := range ids {
				if _, err := s.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: "bench", Credential: "key_b"}, ID: id, Caller: domain.Unpaced}); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
