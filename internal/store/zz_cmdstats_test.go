package store_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestZZCmdStats prints Redis's own CPU per call (INFO commandstats) of the
// store's scripts against the baseline's plain commands. Temporary probe.
func TestZZCmdStats(t *testing.T) {
	if os.Getenv("CMDSTATS") == "" {
		t.Skip("probe")
	}
	p := testenv.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	in, prog, done := loadReference(t)
	s, err := store.New(rdb, store.Options{Prefix: "as", Retention: 720 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	ids := make([]string, n)
	for i := range ids {
		r, _, err := s.Create(ctx, domain.CreateParams{Tenant: "bench", CreatedBy: "key_b", Input: in, IdemKey: domain.IdempotencyKey(fmt.Sprint("k", i))})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	stats := func(label string) {
		v := rdb.Info(ctx, "commandstats").Val()
		for _, l := range strings.Split(v, "\n") {
			if strings.HasPrefix(l, "cmdstat_") {
				t.Logf("%s %s", label, strings.TrimSpace(l))
			}
		}
		rdb.ConfigResetStat(ctx)
	}
	stats("create")
	for i, id := range ids {
		if _, err := s.MarkProcessing(ctx, domain.TransitionParams{Tenant: "bench", ID: id, By: "key_b"}, prog); err != nil {
			t.Fatal(err)
		}
		_ = i
	}
	stats("processing")
	for i, id := range ids {
		if _, err := s.Poll(ctx, domain.PollParams{Tenant: "bench", ID: id, Caller: fmt.Sprint("key_", i)}); err != nil {
			t.Fatal(err)
		}
	}
	stats("poll")
	for _, id := range ids {
		if _, err := s.Complete(ctx, domain.TransitionParams{Tenant: "bench", ID: id, By: "key_b"}, done); err != nil {
			t.Fatal(err)
		}
	}
	stats("complete")
	// the baseline's layout: a hash with the representation's members
	for i := range n {
		k := fmt.Sprint("bl:{bench}:r:", i)
		rdb.HSet(ctx, k, "type", "statement.export", "status", "processing", "context", string(in.Context), "created_by", "bench",
			"created_at", "1764410400000", "updated_at", "1764410404512", "version", "2", "progress", string(prog.Progress),
			"result_type", "answer", "result", string(done.Result), "completed_at", "1764410404512")
	}
	rdb.ConfigResetStat(ctx)
	for i := range n {
		rdb.HGetAll(ctx, fmt.Sprint("bl:{bench}:r:", i))
	}
	stats("baseline-poll")
}

func TestZZScriptOverhead(t *testing.T) {
	if os.Getenv("CMDSTATS") == "" {
		t.Skip("probe")
	}
	p := testenv.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	lib, _ := os.ReadFile("../../scripts/lua/lib.lua")
	rdb.Set(ctx, "k", strings.Repeat("x", 500), 0)
	for _, c := range []struct{ name, src string }{
		{"return1", "return 1"},
		{"get", "return redis.call('GET', KEYS[1])"},
		{"get-pcall-free4", "redis.call('HGET', 'm', 'fz'); local r = redis.call('GET', KEYS[1]); redis.call('HGET', 'pc', 'c'); redis.call('HSET', 'pc', 'c', '1,2,3'); return {0, r}"},
		{"lib+return1", string(lib) + "\nreturn 1"},
	} {
		sc := redis.NewScript(c.src)
		sc.Load(ctx, rdb)
		rdb.ConfigResetStat(ctx)
		for range 5000 {
			if err := sc.Run(ctx, rdb, []string{"k"}).Err(); err != nil && err != redis.Nil {
				t.Fatal(err)
			}
		}
		v := rdb.Info(ctx, "commandstats").Val()
		for _, l := range strings.Split(v, "\n") {
			if strings.HasPrefix(l, "cmdstat_evalsha") {
				t.Logf("%s %s", c.name, strings.TrimSpace(l))
			}
		}
	}
	rdb.ConfigResetStat(ctx)
	for range 5000 {
		rdb.Get(ctx, "k")
	}
	v := rdb.Info(ctx, "commandstats").Val()
	for _, l := range strings.Split(v, "\n") {
		if strings.HasPrefix(l, "cmdstat_get") {
			t.Logf("plain %s", strings.TrimSpace(l))
		}
	}
}

func TestZZPollVariants(t *testing.T) {
	if os.Getenv("CMDSTATS") == "" {
		t.Skip("probe")
	}
	p := testenv.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	in, prog, _ := loadReference(t)
	s, err := store.New(rdb, store.Options{Prefix: "as", Retention: 720 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	ids := make([]string, n)
	for i := range ids {
		r, _, _ := s.Create(ctx, domain.CreateParams{Tenant: "bench", CreatedBy: "key_b", Input: in})
		s.MarkProcessing(ctx, domain.TransitionParams{Tenant: "bench", ID: r.ID, By: "key_b"}, prog)
		ids[i] = r.ID
	}
	run := func(name string, f func(i int) domain.PollParams) {
		rdb.ConfigResetStat(ctx)
		for i := range n {
			s.Poll(ctx, f(i))
		}
		v := rdb.Info(ctx, "commandstats").Val()
		for _, l := range strings.Split(v, "\n") {
			if strings.HasPrefix(l, "cmdstat_evalsha") {
				t.Logf("%s %s", name, strings.TrimSpace(l))
			}
		}
	}
	run("unpaced", func(i int) domain.PollParams { return domain.PollParams{Tenant: "bench", ID: ids[i]} })
	run("new-caller-new-request", func(i int) domain.PollParams {
		return domain.PollParams{Tenant: "bench", ID: ids[i], Caller: "key_a"}
	})
	run("same-caller-again(429)", func(i int) domain.PollParams {
		return domain.PollParams{Tenant: "bench", ID: ids[i], Caller: "key_a"}
	})
	run("second-caller-existing-hash", func(i int) domain.PollParams {
		return domain.PollParams{Tenant: "bench", ID: ids[i], Caller: "key_b"}
	})
}

// TestZZVersusBaseline: Redis CPU per call (INFO commandstats usec_per_call) of the
// store's create, processing, poll and complete against the yardstick's scripts
// (bench/baseline), in the same Redis, same run.
func TestZZVersusBaseline(t *testing.T) {
	if os.Getenv("CMDSTATS") == "" {
		t.Skip("probe")
	}
	p := testenv.StartRedisProcess(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	in, prog, done := loadReference(t)
	s, err := store.New(rdb, store.Options{Prefix: "as", Retention: 720 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	per := func(top string) float64 {
		v := rdb.Info(ctx, "commandstats").Val()
		var calls, usec float64
		for _, l := range strings.Split(v, "\n") {
			if strings.HasPrefix(l, "cmdstat_") {
				var c, u float64
				f := strings.SplitN(strings.SplitN(l, ":", 2)[1], ",", 3)
				fmt.Sscanf(f[0], "calls=%f", &c)
				fmt.Sscanf(f[1], "usec=%f", &u)
				if strings.HasPrefix(l, "cmdstat_"+top+":") {
					calls += c
					usec += u
				}
			}
		}
		rdb.ConfigResetStat(ctx)
		return usec / calls
	}
	// warm the scripts
	r0, _, _ := s.Create(ctx, domain.CreateParams{Tenant: "w", CreatedBy: "key_b", Input: in, IdemKey: "w"})
	s.MarkProcessing(ctx, domain.TransitionParams{Tenant: "w", ID: r0.ID, By: "key_b"}, prog)
	s.Poll(ctx, domain.PollParams{Tenant: "w", ID: r0.ID, Caller: "c"})
	s.Complete(ctx, domain.TransitionParams{Tenant: "w", ID: r0.ID, By: "key_b"}, done)
	bl := map[string]*redis.Script{
		"create": redis.NewScript(`
redis.call('HSET', KEYS[1], 'type', ARGV[3], 'status', 'queued', 'context', ARGV[4], 'created_by', ARGV[5],
  'created_at', ARGV[2], 'updated_at', ARGV[2], 'version', '1')
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1`),
		"processing": redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {1} end
if st ~= 'queued' and st ~= 'processing' then return {6, redis.call('HGETALL', KEYS[1])} end
redis.call('HSET', KEYS[1], 'status', 'processing', 'progress', ARGV[2], 'updated_at', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'version', 1)
return {0, redis.call('HGETALL', KEYS[1])}`),
		"complete": redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {1} end
if st ~= 'queued' and st ~= 'processing' then return {6, redis.call('HGETALL', KEYS[1])} end
redis.call('HSET', KEYS[1], 'status', 'succeeded', 'result_type', ARGV[2], 'result', ARGV[3],
  'updated_at', ARGV[1], 'completed_at', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'version', 1)
return {0, redis.call('HGETALL', KEYS[1])}`),
	}
	for _, sc := range bl {
		sc.Load(ctx, rdb)
	}
	rdb.ConfigResetStat(ctx)

	ids := make([]string, n)
	for i := range ids {
		r, _, _ := s.Create(ctx, domain.CreateParams{Tenant: "bench", CreatedBy: "key_b", Input: in, IdemKey: domain.IdempotencyKey(fmt.Sprint("k", i))})
		ids[i] = r.ID
	}
	aCreate := per("evalsha")
	for i := range n {
		bl["create"].Run(ctx, rdb, []string{fmt.Sprint("bl:{b}:r:", i), "bl:{b}:ix"}, fmt.Sprint(i), "1764410400000", "statement.export", string(in.Context), "bench")
	}
	bCreate := per("evalsha")
	for _, id := range ids {
		s.MarkProcessing(ctx, domain.TransitionParams{Tenant: "bench", ID: id, By: "key_b"}, prog)
	}
	aProc := per("evalsha")
	for i := range n {
		bl["processing"].Run(ctx, rdb, []string{fmt.Sprint("bl:{b}:r:", i)}, "1764410401000", string(prog.Progress))
	}
	bProc := per("evalsha")
	for i, id := range ids {
		s.Poll(ctx, domain.PollParams{Tenant: "bench", ID: id, Caller: fmt.Sprint("key_", i)})
	}
	aPoll := per("evalsha")
	for i := range n {
		rdb.HGetAll(ctx, fmt.Sprint("bl:{b}:r:", i))
	}
	bPoll := per("hgetall")
	for _, id := range ids {
		s.Complete(ctx, domain.TransitionParams{Tenant: "bench", ID: id, By: "key_b"}, done)
	}
	aDone := per("evalsha")
	for i := range n {
		bl["complete"].Run(ctx, rdb, []string{fmt.Sprint("bl:{b}:r:", i)}, "1764410404512", "answer", string(done.Result))
	}
	bDone := per("evalsha")
	for _, x := range []struct {
		name string
		a, b float64
	}{{"create", aCreate, bCreate}, {"processing", aProc, bProc}, {"poll", aPoll, bPoll}, {"complete", aDone, bDone}} {
		t.Logf("%-10s asyncstatus %6.2f us  baseline %6.2f us  ratio %.2fx", x.name, x.a, x.b, x.a/x.b)
	}
}
