package store_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// masterCalls is the number of commands each master of cc executed since its
// last CONFIG RESETSTAT (INFO commandstats, commands run inside scripts
// included), by address, leaving out the client's own housekeeping (CLUSTER,
// INFO, CONFIG, PING...).
func masterCalls(tb testing.TB, cc *redis.ClusterClient) map[string]int64 {
	tb.Helper()
	out := map[string]int64{}
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		var n int64
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
			if !ok {
				continue
			}
			switch strings.TrimPrefix(name, "cmdstat_") {
			case "cluster", "info", "config", "ping", "command", "client", "hello", "readonly", "script":
				continue
			}
			v, _, _ := strings.Cut(rest, ",")
			x, _ := strconv.ParseInt(v, 10, 64)
			n += x
		}
		mu.Lock()
		out[c.Options().Addr] = n
		mu.Unlock()
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// BenchmarkShardedMasterShare runs one tenant's mixed load (create, two polls,
// complete: one op) through one store on the local 3-master Cluster, with 1,
// 16 and 32 tenant shards, and reports the share of the commands each master
// executed (INFO commandstats; target 33% +/- 5% each with S > 1, against 100%
// on one master with S = 1) and the ops/s of this run (S = 16 vs S = 1: the
// same machine, the same run), with the script calls autopipelined (as serve
// does) and without.
//
//	go test -run '^$' -bench BenchmarkShardedMasterShare -benchtime 3000x ./internal/store/
func BenchmarkShardedMasterShare(b *testing.B) {
	in, _, done := loadReference(b)
	for _, c := range []struct {
		n  int
		ap bool
	}{{1, true}, {16, true}, {32, true}, {1, false}, {16, false}} {
		n := c.n
		b.Run(fmt.Sprintf("S=%d/autopipeline=%v", n, c.ap), func(b *testing.B) {
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.Cluster(b), PoolSize: 64})
			b.Cleanup(func() { cc.Close() })
			s, err := store.New(cc, store.Options{Prefix: testenv.Isolate(b), Retention: 720 * time.Hour,
				AutoPipeline: c.ap, TenantShards: n})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Ready(ctx); err != nil {
				b.Fatal(err)
			}
			if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
				return c.ConfigResetStat(ctx).Err()
			}); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in})
					if err == nil {
						_, err = s.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: "bench"}, ID: r.ID, Caller: "key_p"})
					}
					if err == nil {
						_, err = s.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: "bench"}, ID: r.ID})
					}
					if err == nil {
						_, err = s.Complete(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, ID: r.ID}, done)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			calls := masterCalls(b, cc)
			var total int64
			shares := make([]float64, 0, len(calls))
			for _, c := range calls {
				total += c
			}
			for _, c := range calls {
				shares = append(shares, 100*float64(c)/float64(max(total, 1)))
			}
			sort.Float64s(shares)
			slices.Reverse(shares)
			for i, sh := range shares {
				b.ReportMetric(sh, fmt.Sprintf("master%d-%%", i+1))
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkShardedList measures one page of 50 of a tenant of 100k requests
// with 1 and 16 shards (and 32 on the Cluster) on the real redis-server (every shard on one server:
// the worst case, where a page costs the server 16 list scripts) and on the
// local Cluster (each master runs its shards' scripts in parallel), and
// reports p50 and p99 page latency: the first page unfiltered and by status,
// and a page halfway down (created_before the middle: what a deep cursor
// costs); on the single server also the CPU its main thread spent per page
// (redis-cpu-µs/op), steadier than the latencies on a shared machine.
//
//	go test -run '^$' -bench BenchmarkShardedList -benchtime 400x ./internal/store/
func BenchmarkShardedList(b *testing.B) {
	const n = 100_000
	for _, backend := range []string{"redis", "cluster"} {
		shardCounts := []int{1, 16}
		if backend == "cluster" {
			shardCounts = append(shardCounts, 32) // the other choice of default (config.DefaultClusterShards)
		}
		for _, shards := range shardCounts {
			b.Run(fmt.Sprintf("%s/S=%d", backend, shards), func(b *testing.B) {
				var rdb redis.UniversalClient
				if backend == "redis" {
					rdb = redis.NewClient(&redis.Options{Addr: testenv.Redis(b)})
				} else {
					rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.Cluster(b)})
				}
				b.Cleanup(func() { rdb.Close() })
				prefix := testenv.Isolate(b)
				s, err := store.New(rdb, store.Options{Prefix: prefix, Retention: 720 * time.Hour, TenantShards: shards, AutoPipeline: true})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Ready(ctx); err != nil {
					b.Fatal(err)
				}
				mid := seedShards(b, rdb, prefix, store.TenantTags(s, "bench"), n)
				time.Sleep(time.Second) // let Redis finish rehashing
				for _, c := range []struct {
					name string
					f    domain.ListFilter
				}{
					{"unfiltered", domain.ListFilter{Limit: 50}},
					{"status=failed", domain.ListFilter{Limit: 50, Statuses: []domain.Status{domain.StatusFailed}}},
					// what a page deep in the listing (a cursor far down) costs
					{"halfway-down", domain.ListFilter{Limit: 50, CreatedBefore: &mid}},
				} {
					b.Run(c.name, func(b *testing.B) {
						for range 50 { // warm up
							if _, err := s.List(ctx, inTenant("bench", c.f)); err != nil {
								b.Fatal(err)
							}
						}
						lat := make([]time.Duration, 0, b.N)
						items := 0
						var cpu0 float64
						if c, ok := rdb.(*redis.Client); ok {
							cpu0 = redisCPU(b, c)
						}
						b.ResetTimer()
						for b.Loop() {
							t0 := time.Now()
							p, err := s.List(ctx, inTenant("bench", c.f))
							lat = append(lat, time.Since(t0))
							if err != nil {
								b.Fatal(err)
							}
							items += len(p.Items)
						}
						if c, ok := rdb.(*redis.Client); ok {
							// every shard on this one server: what a page costs it
							b.ReportMetric((redisCPU(b, c)-cpu0)/float64(len(lat)), "redis-cpu-µs/op")
						}
						slices.Sort(lat)
						b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
						b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
						b.ReportMetric(float64(items)/float64(len(lat)), "items/op")
					})
				}
				// free the memory for the next run
				del := func(ctx context.Context, c *redis.Client) error {
					it := c.Scan(ctx, 0, prefix+":*", 10000).Iterator()
					var keys []string
					for it.Next(ctx) {
						keys = append(keys, it.Val())
					}
					for _, k := range keys {
						c.Unlink(ctx, k)
					}
					return it.Err()
				}
				if cc, ok := rdb.(*redis.ClusterClient); ok {
					_ = cc.ForEachMaster(ctx, del)
				} else {
					_ = del(ctx, rdb.(*redis.Client))
				}
			})
		}
	}
}

// BenchmarkShardedMemory: the bytes one reference request (created, polled,
// completed) holds in the real redis-server, with 1 and 16 shards (INFO
// used_memory delta over b.N requests, client buffers left out).
//
//	go test -run '^$' -bench BenchmarkShardedMemory -benchtime 5000x ./internal/store/
func BenchmarkShardedMemory(b *testing.B) {
	in, _, done := loadReference(b)
	for _, shards := range []int{1, 16} {
		b.Run(fmt.Sprintf("S=%d", shards), func(b *testing.B) {
			rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b)})
			b.Cleanup(func() { rdb.Close() })
			s, err := store.New(rdb, store.Options{Prefix: testenv.Isolate(b), Retention: 720 * time.Hour, TenantShards: shards})
			if err != nil {
				b.Fatal(err)
			}
			// the shards' meta hashes exist before the measure: per tenant, not per request
			for range 8 * shards {
				if _, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in}); err != nil {
					b.Fatal(err)
				}
			}
			used := func() int64 {
				info := rdb.Info(ctx, "memory").Val()
				v := func(k string) int64 {
					for _, line := range strings.Split(info, "\n") {
						if x, ok := strings.CutPrefix(strings.TrimSpace(line), k+":"); ok {
							n, _ := strconv.ParseInt(x, 10, 64)
							return n
						}
					}
					return 0
				}
				return v("used_memory") - v("mem_clients_normal")
			}
			before := used()
			b.ResetTimer()
			for b.Loop() {
				r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in})
				if err == nil {
					_, err = s.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: "bench"}, ID: r.ID, Caller: "key_p"})
				}
				if err == nil {
					_, err = s.Complete(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, ID: r.ID}, done)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(used()-before)/float64(b.N), "B/request")
		})
	}
}

// BenchmarkShardedThroughput is poll and create throughput through one store
// (one replica), S = 16 against S = 1, on the real redis-server and on the
// local Cluster, with the script calls autopipelined as serve makes them.
// Each S runs three times, alternating, in one run, so that the machine's
// drift shows beside the difference. On the single server every shard is on
// the one server: what is measured is what sharding costs the request path
// itself. On the Cluster S = 16 spreads over three masters that share this
// machine's two cores with the client: what it gains there needs masters
// with cores of their own, so the benchmark also reports the CPU each master's
// main thread spent per op (INFO cpu): one core divided by the busiest
// master's share is what one tenant's load can reach on masters that do not
// share cores.
//
//	go test -run '^$' -bench BenchmarkShardedThroughput -benchtime 20000x ./internal/store/
func BenchmarkShardedThroughput(b *testing.B) {
	in, _, _ := loadReference(b)
	for _, backend := range []string{"redis", "cluster"} {
		for _, op := range []string{"poll", "create"} {
			for round := range 3 {
				for _, shards := range []int{1, 16} {
					b.Run(fmt.Sprintf("%s/%s/S=%d/round=%d", backend, op, shards, round+1), func(b *testing.B) {
						var rdb redis.UniversalClient
						if backend == "redis" {
							rdb = redis.NewClient(&redis.Options{Addr: testenv.Redis(b), PoolSize: 64})
						} else {
							rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.Cluster(b), PoolSize: 64})
						}
						b.Cleanup(func() { rdb.Close() })
						s, err := store.New(rdb, store.Options{Prefix: testenv.Isolate(b), Retention: time.Hour,
							AutoPipeline: true, TenantShards: shards})
						if err != nil {
							b.Fatal(err)
						}
						if err := s.Ready(ctx); err != nil {
							b.Fatal(err)
						}
						var ids []string
						if op == "poll" {
							for range 1000 {
								r, _, err := s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in})
								if err != nil {
									b.Fatal(err)
								}
								ids = append(ids, r.ID)
							}
						}
						var next atomic.Int64
						cpu0 := serverCPU(b, rdb)
						b.SetParallelism(4)
						b.ResetTimer()
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								var err error
								if op == "poll" {
									id := ids[int(next.Add(1))%len(ids)]
									_, err = s.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: "bench"}, ID: id})
								} else {
									_, _, err = s.Create(ctx, domain.CreateParams{Call: domain.Call{Tenant: "bench", By: "key_b"}, Input: in})
								}
								if err != nil {
									b.Error(err)
									return
								}
							}
						})
						b.StopTimer()
						b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
						var sum, busiest float64
						for addr, c := range serverCPU(b, rdb) {
							d := (c - cpu0[addr]) / float64(b.N)
							sum += d
							busiest = max(busiest, d)
						}
						b.ReportMetric(sum, "redis-cpu-µs/op")
						b.ReportMetric(busiest, "busiest-cpu-µs/op")
					})
				}
			}
		}
	}
}

// serverCPU is the main-thread CPU time, in µs, of the server of rdb, or of
// each master of a Cluster, by address (redisCPU).
func serverCPU(b *testing.B, rdb redis.UniversalClient) map[string]float64 {
	out := map[string]float64{}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		// (each master asked from the benchmark's goroutine: redisCPU may Fatal)
		var masters []*redis.Client
		var mu sync.Mutex
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			masters = append(masters, c)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		for _, c := range masters {
			out[c.Options().Addr] = redisCPU(b, c)
		}
		return out
	}
	c := rdb.(*redis.Client)
	out[c.Options().Addr] = redisCPU(b, c)
	return out
}
