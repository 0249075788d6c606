package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// cannedRedis answers every command without a server: a script call "0", with
// the rate part a counted call carries (a key of a rate counter in its KEYS),
// then rec, anything else 1. What is left to measure is the store's own Go
// side of a call (ids, keys, arguments, decoding) and go-redis's command
// building.
type cannedRedis struct {
	// rec follows the code (and rate part) of a script's answer: the record
	// a transition answers with; "" for a create, whose answer is the code.
	rec string
}

func (cannedRedis) DialHook(next redis.DialHook) redis.DialHook { return next }
func (cannedRedis) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h cannedRedis) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	plain := "0" + h.rec // made once: an uncounted call's answer costs the hook nothing
	return func(_ context.Context, cmd redis.Cmder) error {
		// a script's *redis.Cmd, or the wrapper a write goes in (once, scripts.go)
		c, ok := cmd.(interface{ SetVal(any) })
		if !ok {
			if ic, ok := cmd.(*redis.IntCmd); ok {
				ic.SetVal(1)
			}
			return nil
		}
		reply := plain
		for _, a := range cmd.Args() {
			if s, ok := a.(string); ok && strings.Contains(s, ":rl:") {
				reply = "0:10000,9999," + strconv.FormatInt(time.Now().UnixMilli()+1000, 10) + ";" + h.rec
				break
			}
		}
		c.SetVal(reply)
		return nil
	}
}

// goSideStore is a store whose Redis is hook, never dialled; counted: the
// write limits are counted in the script (Options.RateLimits, as serve
// configures them), so the caller's params need a credential and a RateInfo.
func goSideStore(b *testing.B, hook cannedRedis, counted bool) *store.Store {
	b.Helper()
	rdb := redis.NewClient(&redis.Options{Dialer: func(context.Context, string, string) (net.Conn, error) {
		b.Fatal("dialled")
		return nil, nil
	}})
	rdb.AddHook(hook)
	o := store.Options{}
	if counted {
		o.RateLimits = &ratelimit.Rates{Write: ratelimit.Rate{Limit: 10000, Period: time.Second},
			Tenant: ratelimit.Rate{Limit: 20000, Period: time.Second}}
	}
	st, err := store.New(rdb, o)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkCreateGoSide is a create (the reference request, with an
// Idempotency-Key) through the store against cannedRedis: the store's CPU and
// allocations per call, without Redis or a network. counted: the write limits
// are counted in the script (Options.RateLimits, as serve configures them).
func BenchmarkCreateGoSide(b *testing.B) {
	raw, err := os.ReadFile(testenv.ReferencePath(b))
	if err != nil {
		b.Fatal(err)
	}
	var ref struct {
		Create struct {
			Type     string          `json:"type"`
			Context  json.RawMessage `json:"context"`
			Duration int             `json:"estimated_duration_seconds"`
		} `json:"create"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		b.Fatal(err)
	}
	in := domain.CreateInput{Type: ref.Create.Type, Context: ref.Create.Context, EstimatedDurationSeconds: ref.Create.Duration}
	for _, counted := range []bool{false, true} {
		b.Run("counted="+strconv.FormatBool(counted), func(b *testing.B) {
			st := goSideStore(b, cannedRedis{}, counted)
			p := domain.CreateParams{Call: domain.Call{Tenant: "acme", By: "k_bench"}, Input: in}
			if counted {
				p.Credential, p.Rate = "k_bench", &domain.RateInfo{}
			}
			ctx := context.Background()
			perCall(b, func(i int) {
				p.IdemKey = domain.IdempotencyKey("idem-" + strconv.Itoa(i))
				if _, _, err := st.Create(ctx, p); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkTransitionGoSide is a complete (the reference result, with an
// Idempotency-Key) through the store against cannedRedis, which answers with
// the completed record: the store's CPU and allocations per transition call,
// without Redis or a network, as BenchmarkCreateGoSide measures a create.
func BenchmarkTransitionGoSide(b *testing.B) {
	ref := testenv.ReferenceRequest(b)
	var create struct {
		Type    string          `json:"type"`
		Context json.RawMessage `json:"context"`
	}
	var complete struct {
		ResultType string          `json:"result_type"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(ref["create"], &create); err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(ref["complete"], &complete); err != nil {
		b.Fatal(err)
	}
	var ctxJSON, result bytes.Buffer
	if err := json.Compact(&ctxJSON, create.Context); err != nil {
		b.Fatal(err)
	}
	if err := json.Compact(&result, complete.Result); err != nil {
		b.Fatal(err)
	}
	in := domain.CompleteInput{ResultType: complete.ResultType, Result: result.Bytes()}
	id := uuid.Must(uuid.NewV7()).String()
	// The record as transition.lua leaves it after a processing and this
	// complete (record.go's layout): succeeded, version 3, expiring, with the
	// progress and the result.
	rec := strings.Join([]string{"s", "3", create.Type, strconv.FormatInt(time.Now().Add(24*time.Hour).UnixMilli(), 10),
		"k_bench", "2000", "2000", "p1000,s2000", complete.ResultType, ctxJSON.String(),
		`{"percent":40,"message":"page 6 of 14"}`, result.String(), "", "", "", ""}, "\x1f")
	for _, counted := range []bool{false, true} {
		b.Run("counted="+strconv.FormatBool(counted), func(b *testing.B) {
			st := goSideStore(b, cannedRedis{rec: rec}, counted)
			p := domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "k_bench"}, ID: id}
			if counted {
				p.Credential, p.Rate = "k_bench", &domain.RateInfo{}
			}
			ctx := context.Background()
			perCall(b, func(i int) {
				p.IdemKey = domain.IdempotencyKey("idem-" + strconv.Itoa(i))
				req, err := st.Complete(ctx, p, in)
				if err != nil {
					b.Fatal(err)
				}
				if req.Status != domain.StatusSucceeded {
					b.Fatalf("status %s", req.Status)
				}
			})
		})
	}
}

// perCall runs call b.N times (i: the iteration) and reports its
// allocations and CPU time per call: CPU time, not wall time, as the machine
// is shared, and a neighbour's load stretches the wall clock far more.
func perCall(b *testing.B, call func(i int)) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		call(i)
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time (user and system) this process has used, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
