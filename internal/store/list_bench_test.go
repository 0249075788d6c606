package store_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// benchTypes is the number of request types of a seeded tenant: one type is 1%.
const benchTypes = 100

// benchStatus draws a status with a plausible mix: mostly finished.
func benchStatus(r *rand.Rand) domain.Status {
	switch x := r.Float64(); {
	case x < 0.02:
		return domain.StatusQueued
	case x < 0.05:
		return domain.StatusProcessing
	case x < 0.90:
		return domain.StatusSucceeded
	case x < 0.96:
		return domain.StatusFailed
	case x < 0.99:
		return domain.StatusCancelled
	default:
		return domain.StatusExpired
	}
}

var benchCode = map[domain.Status]string{
	domain.StatusQueued: "q", domain.StatusProcessing: "p", domain.StatusSucceeded: "s",
	domain.StatusFailed: "f", domain.StatusCancelled: "c", domain.StatusExpired: "e",
}

// seedTenant writes n requests of tenant straight into Redis, in big pipelines,
// as create.lua and transition.lua lay them out (record string, its (status,
// type) index, the types set, deadlines; no retention buckets, which listing
// does not read), created one every 2.6 s over the last
// 30 days (for n = 1M). It returns the created_at of the middle request.
// Record field positions (record.go), for seeding records directly.
const (
	fieldExpires    = 3
	fieldUpdated    = 5
	fieldCompleted  = 6
	fieldEvents     = 7
	fieldResultType = 8
	fieldResult     = 11
)

func seedTenant(b *testing.B, rdb *redis.Client, prefix, tenant string, n int) time.Time {
	return seedShards(b, rdb, prefix, []string{"{" + tenant + "}"}, n)
}

// seedShards is seedTenant over the hash tags of a tenant's shards
// (store.TenantTags): each request goes to a shard drawn at random, its id
// marked with it, as Store.Create draws it. (Not i mod len(tags): with types
// drawn as i mod benchTypes, 16 shards would each hold only 25 of the 100
// types, and a sharded page would open a quarter of the indexes it does in
// use.)
func seedShards(b *testing.B, rdb redis.Cmdable, prefix string, tags []string, n int) time.Time {
	b.Helper()
	start := time.Now()
	r := rand.New(rand.NewPCG(1, uint64(n)))
	rs := rand.New(rand.NewPCG(2, uint64(n))) // shards: apart from r, so that S does not change the statuses
	now := time.Now().UnixMilli()
	step := max(int64(30*24*time.Hour/time.Millisecond)/int64(n), 1)
	first := now - step*int64(n)
	k := func(sh int, s string) string { return prefix + ":" + tags[sh] + ":" + s }
	const batch = 2000
	var mid time.Time
	for lo := 0; lo < n; lo += batch {
		p := rdb.Pipeline()
		zs := map[string][]redis.Z{} // by key
		for i := lo; i < min(lo+batch, n); i++ {
			ca := first + int64(i)*step
			if i == n/2 {
				mid = time.UnixMilli(ca)
			}
			u := uuid.Must(uuid.NewV7())
			for j := range 6 {
				u[j] = byte(ca >> (40 - 8*j))
			}
			id := u.String()
			sh := rs.IntN(len(tags))
			if len(tags) > 1 {
				id = store.Remark(id, sh)
			}
			typ := "type-" + strconv.Itoa(i%benchTypes)
			st := benchStatus(r)
			c := benchCode[st]
			// the record in record.go's layout: s v t ex b ua co ev rt c g r f x
			f := []string{c, "2", typ, "", "key_bench", "0", "", "", "", `{"account":"acc_881204","year":2025,"format":"pdf","locale":"en-GB"}`, "", "", "", ""}
			if st.Terminal() {
				ex := ca + 5000 + int64(720*time.Hour/time.Millisecond)
				f[fieldExpires], f[fieldUpdated], f[fieldCompleted], f[fieldEvents] = strconv.FormatInt(ex, 10), "5000", "5000", c+"5000"
				if st == domain.StatusSucceeded {
					f[fieldResultType], f[fieldResult] = "link", `{"url":"https://files.example/x.pdf","expires_at":"2026-12-01T00:00:00.000Z"}`
				}
			} else {
				zs[k(sh, "dl")] = append(zs[k(sh, "dl")], redis.Z{Score: float64(now + int64(time.Hour/time.Millisecond)), Member: id})
			}
			p.Set(ctx, k(sh, "r:"+id), strings.Join(f, "\x1f"), 0)
			ix := k(sh, "ix:"+c+":"+typ)
			zs[ix] = append(zs[ix], redis.Z{Score: float64(ca), Member: id})
			p.HSet(ctx, k(sh, "m"), "t:"+typ, "1")
		}
		for key, members := range zs {
			p.ZAdd(ctx, key, members...)
		}
		if _, err := p.Exec(ctx); err != nil {
			b.Fatalf("seed: %v", err)
		}
	}
	b.Logf("seeded %d requests in %s", n, time.Since(start).Round(time.Millisecond))
	return mid
}

// BenchmarkList measures one page of 50 (the List call: the list script and the
// records read, on a real redis-server over loopback) for tenants of 1k and 100k
// requests, and 1M with ASYNCSTATUS_BENCH_LARGE=1 (seeding takes about 30 s
// and ~1.6 GB of Redis memory):
//
//	go test -run '^$' -bench BenchmarkList -benchtime 2s ./internal/store/
//	ASYNCSTATUS_BENCH_LARGE=1 go test -run '^$' -bench BenchmarkList -benchtime 2s -timeout 30m ./internal/store/
//
// Figures are in docs/listing.md.
func BenchmarkList(b *testing.B) {
	sizes := []int{1_000, 100_000}
	if os.Getenv("ASYNCSTATUS_BENCH_LARGE") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("tenant=%s", count(n)), func(b *testing.B) {
			rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b)})
			b.Cleanup(func() { rdb.Close() })
			prefix := testenv.Isolate(b)
			mid := seedTenant(b, rdb, prefix, "bench", n)
			s, err := store.New(rdb, store.Options{Prefix: prefix, Retention: 720 * time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Ready(ctx); err != nil {
				b.Fatal(err)
			}
			// Let Redis finish growing its dictionaries (incremental rehashing taxes
			// every command for a while after a big load), and warm up.
			time.Sleep(time.Duration(n/100_000+1) * time.Second)
			for range 200 {
				if _, err := s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "bench"}}); err != nil {
					b.Fatal(err)
				}
			}
			st := func(x ...domain.Status) []domain.Status { return x }
			for _, c := range []struct {
				name string
				f    domain.ListFilter
			}{
				{"unfiltered", domain.ListFilter{}},
				{"unfiltered,deep", domain.ListFilter{CreatedBefore: &mid}}, // costs what a cursor halfway down does
				{"type=1%", domain.ListFilter{Type: "type-7"}},
				{"status=failed(6%)", domain.ListFilter{Statuses: st(domain.StatusFailed)}},
				{"status=queued,processing(5%)", domain.ListFilter{Statuses: st(domain.StatusQueued, domain.StatusProcessing)}},
				{"type=1%+status=succeeded", domain.ListFilter{Type: "type-7", Statuses: st(domain.StatusSucceeded)}},
				{"type=1%+status=failed(0.06%)", domain.ListFilter{Type: "type-7", Statuses: st(domain.StatusFailed)}},
			} {
				c.f.Limit = 50
				b.Run(c.name, func(b *testing.B) {
					var items int
					before := redisCPU(b, rdb)
					for b.Loop() {
						p, err := s.List(ctx, inTenant("bench", c.f))
						if err != nil {
							b.Fatal(err)
						}
						items += len(p.Items)
					}
					b.ReportMetric(float64(items)/float64(b.N), "items/op")
					b.ReportMetric((redisCPU(b, rdb)-before)/float64(b.N), "redis-cpu-µs/op")
				})
			}
			// Free the server's memory for the next size.
			it := rdb.Scan(ctx, 0, prefix+":*", 10000).Iterator()
			var del []string
			for it.Next(ctx) {
				if del = append(del, it.Val()); len(del) == 10000 {
					rdb.Unlink(ctx, del...)
					del = del[:0]
				}
			}
			if len(del) > 0 {
				rdb.Unlink(ctx, del...)
			}
		})
	}
}

// redisCPU is the CPU time, in µs, Redis's main thread has used so far (INFO cpu):
// what a call costs the server, whatever else runs on the machine.
func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		for _, k := range []string{"used_cpu_sys_main_thread:", "used_cpu_user_main_thread:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f * 1e6
			}
		}
	}
	return sum
}

func count(n int) string {
	switch {
	case n >= 1_000_000:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1_000:
		return strconv.Itoa(n/1_000) + "k"
	}
	return strconv.Itoa(n)
}

// BenchmarkReapplyRetention times `retention reapply` over a seeded tenant of 100k
// requests (85k terminal), every record getting a new expires_at; one op is the
// whole tenant. Figures are in docs/operations.md.
//
//	go test -run '^$' -bench BenchmarkReapplyRetention -benchtime 3x ./internal/store/
func BenchmarkReapplyRetention(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b)})
	b.Cleanup(func() { rdb.Close() })
	prefix := testenv.Isolate(b)
	seedTenant(b, rdb, prefix, "bench", 100_000)
	var seen int64
	i := 0
	for b.Loop() {
		i++
		// a different retention each time, so that every record is rewritten
		s, err := store.New(rdb, store.Options{Prefix: prefix, Retention: time.Duration(720+i) * time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		before := redisCPU(b, rdb)
		p, err := s.ReapplyRetention(ctx, store.ReapplyOptions{Tenant: "bench"})
		if err != nil || p.Updated+p.Deleted != p.Seen { // the oldest seeded records may be past their old expiry
			b.Fatalf("%+v %v", p, err)
		}
		seen += p.Seen
		b.ReportMetric((redisCPU(b, rdb)-before)/float64(p.Seen), "redis-cpu-µs/record")
	}
	b.ReportMetric(float64(seen)/b.Elapsed().Seconds(), "records/s")
}
