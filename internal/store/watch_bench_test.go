package store_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// BenchmarkWatchedWriteCost measures what the change log of watches
// (docs/reference.md §16; watch.go) adds to a create and a complete in Redis:
// the reference request's create and complete for a tenant nobody watches,
// then for one that is watched (its logs armed: one XADD each, and a PUBLISH
// for the create), in the same run on a private redis-server. The ratio is
// the figure to compare.
//
//	go test -run XXX -bench BenchmarkWatchedWriteCost -benchtime 3000x ./internal/store/
//
// With ASYNCSTATUS_BENCH_METER=callgrind the meter is the instructions
// redis-server executed (stable on a noisy machine; see BenchmarkRedisCost):
//
//	ASYNCSTATUS_BENCH_METER=callgrind go test -run XXX -bench BenchmarkWatchedWriteCost -benchtime 1000x ./internal/store/
func BenchmarkWatchedWriteCost(b *testing.B) {
	in, _, done := loadReference(b)
	var rdb *redis.Client
	var spent func(cmd string) float64
	unit := "redis-µs/op"
	if os.Getenv("ASYNCSTATUS_BENCH_METER") == "callgrind" {
		rdb, spent = callgrindRedis(b)
		unit = "redis-instr/op"
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: testenv.StartRedisProcess(b).Addr()})
		spent = commandstatsMeter(b, rdb)
	}
	b.Cleanup(func() { rdb.Close() })
	s, err := store.New(rdb, store.Options{Prefix: "as", Retention: 720 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if err := store.ArmChangeLogs(ctx, s, "watched"); err != nil {
		b.Fatal(err)
	}
	costs := map[string]float64{}
	for _, tenant := range []string{"unwatched", "watched"} {
		// The testing package runs each sub-benchmark with b.N = 1 first:
		// creates accumulate, and completes take the next ones not done.
		var ids []string
		off := 0
		b.Run("Create/"+tenant, func(b *testing.B) {
			spent("evalsha")
			for range b.N {
				r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: tenant, By: "key_b"}, Input: in})
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, r.ID)
			}
			c := spent("evalsha") / float64(b.N)
			costs["create/"+tenant] = c
			b.ReportMetric(c, unit)
		})
		b.Run("Complete/"+tenant, func(b *testing.B) {
			if len(ids) < off+b.N {
				b.Fatalf("%d requests for %d completes", len(ids)-off, b.N)
			}
			spent("evalsha")
			next := ids[off : off+b.N]
			off += b.N
			for _, id := range next {
				if _, err := s.Complete(ctx, domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: "key_b"}, ID: id}, done); err != nil {
					b.Fatal(err)
				}
			}
			c := spent("evalsha") / float64(b.N)
			costs["complete/"+tenant] = c
			b.ReportMetric(c, unit)
		})
	}
	for _, op := range []string{"create", "complete"} {
		if u := costs[op+"/unwatched"]; u > 0 {
			fmt.Printf("%s: watched/unwatched = %.3f (%s)\n", op, costs[op+"/watched"]/u, unit)
		}
	}
}
