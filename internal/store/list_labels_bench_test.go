package store_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// benchLabels are a request's labels in the label benchmarks: the first two
// are env (2 values) and team (20 values), then cust (100 values: 1% each),
// then five more of a few values each.
func benchLabels(r *rand.Rand, k int) domain.Labels {
	all := []domain.Label{
		{Name: "env", Value: []string{"prod", "dev"}[r.IntN(2)]},
		{Name: "team", Value: fmt.Sprintf("team-%02d", r.IntN(20))},
		{Name: "cust", Value: fmt.Sprintf("c-%02d", r.IntN(100))},
		{Name: "region", Value: []string{"eu-west-1", "us-east-1", "ap-south-1"}[r.IntN(3)]},
		{Name: "tier", Value: []string{"gold", "silver", "bronze"}[r.IntN(3)]},
		{Name: "app", Value: fmt.Sprintf("app-%d", r.IntN(10))},
		{Name: "zone", Value: fmt.Sprintf("z%d", r.IntN(4))},
		{Name: "ver", Value: fmt.Sprintf("v1.%d", r.IntN(5))},
	}
	return domain.MakeLabels(all[:k])
}

// seedLabelled creates n requests of tenant through the store (the real
// scripts), with k labels each, of benchTypes types, in benchStatus's mix.
func seedLabelled(b *testing.B, s *store.Store, tenant string, n, k int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := w; i < n; i += 8 {
				typ := "type-" + strconv.Itoa(r.IntN(benchTypes))
				req, _, err := s.Create(ctx, domain.CreateParams{
					Call:  domain.Call{Tenant: tenant, By: "key_a"},
					Input: domain.CreateInput{Type: typ, Context: json.RawMessage(`{"account":"acc_881204","year":2025}`), Labels: benchLabels(r, k)},
				})
				if err == nil {
					err = benchMove(s, tenant, req.ID, benchStatus(r))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

func benchMove(s *store.Store, tenant, id string, st domain.Status) error {
	p := domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: "key_a"}, ID: id}
	var err error
	switch st {
	case domain.StatusProcessing:
		_, err = s.MarkProcessing(ctx, p, domain.ProgressInput{})
	case domain.StatusSucceeded, domain.StatusExpired:
		_, err = s.Complete(ctx, p, domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"statement_id":"stmt_1","pages":14}`)})
	case domain.StatusFailed:
		_, err = s.Fail(ctx, p, domain.FailInput{Failure: domain.FailureJSON("ERR_UPSTREAM", "ledger service unavailable")})
	case domain.StatusCancelled:
		_, err = s.Cancel(ctx, p, domain.CancelInput{})
	}
	return err
}

func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory")
	return 0
}

// BenchmarkLabels measures what labels cost (docs/listing.md, Labels), on the
// test binary's redis-server: Redis memory per request with 0, 2 and 8 labels
// (requests made and moved through the real scripts, in BenchmarkList's
// status mix, so most are terminal with a retention bucket entry), and a
// first page of 50 by one label against a page by type, in one tenant.
func BenchmarkLabels(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b), PoolSize: 16})
	b.Cleanup(func() { rdb.Close() })
	prefix := testenv.Isolate(b)
	s, err := store.New(rdb, store.Options{Prefix: prefix, Retention: 720 * time.Hour, OpTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Ready(ctx); err != nil {
		b.Fatal(err)
	}
	const n = 5_000
	for _, k := range []int{0, 2, 8} {
		b.Run(fmt.Sprintf("memory/labels=%d", k), func(b *testing.B) {
			for b.Loop() {
				before := usedMemory(b, rdb)
				seedLabelled(b, s, fmt.Sprintf("mem-%d-%d", k, b.N), n, k)
				b.ReportMetric(float64(usedMemory(b, rdb)-before)/n, "B/request")
			}
		})
	}

	const pages = 20_000
	seedLabelled(b, s, "pages", pages, 3)
	time.Sleep(time.Second) // let Redis finish rehashing
	st := func(x ...domain.Status) []domain.Status { return x }
	for _, c := range []struct {
		name string
		f    domain.ListFilter
	}{
		{"type=1%", domain.ListFilter{Type: "type-7"}},
		{"label=1%(cust)", domain.ListFilter{LabelSelector: "cust=c-07"}},
		{"unfiltered", domain.ListFilter{}},
		{"label=50%(env)", domain.ListFilter{LabelSelector: "env=prod"}},
		{"label=5%(team)", domain.ListFilter{LabelSelector: "team=team-03"}},
		{"labels=2.5%(env+team)", domain.ListFilter{LabelSelector: "env=prod,team=team-03"}},
		{"label=1%+type=1%", domain.ListFilter{LabelSelector: "cust=c-07", Type: "type-7"}},
		{"label=5%+status=failed", domain.ListFilter{LabelSelector: "team=team-03", Statuses: st(domain.StatusFailed)}},
	} {
		c.f.Limit = 50
		b.Run("page/"+c.name, func(b *testing.B) {
			var items int
			before := redisCPU(b, rdb)
			for b.Loop() {
				p, err := s.List(ctx, inTenant("pages", c.f))
				if err != nil {
					b.Fatal(err)
				}
				items += len(p.Items)
			}
			b.ReportMetric(float64(items)/float64(b.N), "items/op")
			b.ReportMetric((redisCPU(b, rdb)-before)/float64(b.N), "redis-cpu-µs/op")
		})
	}
	for _, c := range []struct {
		name string
		f    domain.ListFilter
	}{
		{"type=1%", domain.ListFilter{Type: "type-7"}},
		{"label=1%(cust)", domain.ListFilter{LabelSelector: "cust=c-07"}},
		{"label=50%(env)", domain.ListFilter{LabelSelector: "env=prod"}},
		{"unfiltered", domain.ListFilter{}},
	} {
		b.Run("counts/"+c.name, func(b *testing.B) {
			before := redisCPU(b, rdb)
			for b.Loop() {
				if _, err := s.Counts(ctx, inTenant("pages", c.f)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((redisCPU(b, rdb)-before)/float64(b.N), "redis-cpu-µs/op")
		})
	}
}
