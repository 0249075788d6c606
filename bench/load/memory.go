package load

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MemResult is the Redis memory that N reference requests take on one server.
type MemResult struct {
	Server string
	N      int
	// UsedDelta is INFO used_memory after minus before: everything, including the
	// main dictionary's buckets and the expires dictionary.
	UsedDelta int64
	// ClientsDelta is the part of UsedDelta that is connection buffers
	// (mem_clients_normal): connection state, not request state.
	ClientsDelta int64
	// NewKeys is how many keys the N requests added (DBSIZE delta).
	NewKeys int64
	// Kinds are the keys grouped by pattern, sized with MEMORY USAGE.
	Kinds []KindUsage
	// Record describes one record (a hash or a string): its encoding and its longest fields.
	Record string
}

// KindUsage is one key pattern's share of the memory.
type KindUsage struct {
	Pattern  string // key with tenant and ids replaced: as:{T}:r:<id>
	What     string // type and encoding, e.g. "hash, hashtable"
	Keys     int
	Bytes    int64 // MEMORY USAGE added over the run
	Extra    bool  // not part of the reference figure (shown for information)
	ExtraWhy string
}

// Figure is the bytes per request: the used_memory delta without the change in
// client buffers, divided by N.
func (m MemResult) Figure() float64 { return m.PerRequest(m.UsedDelta - m.ClientsDelta) }

// PerRequest divides a byte count by the number of requests.
func (m MemResult) PerRequest(b int64) float64 { return float64(b) / float64(m.N) }

// UsageSum is the MEMORY USAGE total of the kinds in the reference figure.
func (m MemResult) UsageSum() int64 {
	var t int64
	for _, k := range m.Kinds {
		if !k.Extra {
			t += k.Bytes
		}
	}
	return t
}

// measureMemory takes MemN reference requests through create, processing and
// complete on each server, each time on an emptied Redis, and sizes what they left.
func (h *harness) measureMemory(ctx context.Context) error {
	for _, s := range []*server{h.as, h.bl} {
		if err := h.redis.rdb.FlushAll(ctx).Err(); err != nil {
			return err
		}
		keys := map[string]string{tenantMem: baselineKey, tenantMemWarm: baselineKey}
		if !s.baseline {
			tenants := []string{tenantMem, tenantMemWarm}
			made := make([]string, len(tenants))
			if err := parallel(ctx, len(tenants), len(tenants), func(i int) (err error) {
				made[i], err = h.createKey(ctx, s, tenants[i], "read,write", "bench-memory")
				return err
			}); err != nil {
				return err
			}
			for i, t := range tenants {
				keys[t] = made[i]
			}
		}
		h.only(s)
		t0 := time.Now()
		res, err := h.memoryOf(ctx, s, keys)
		if err != nil {
			return fmt.Errorf("memory of %s: %w", s.name, err)
		}
		h.report.Memory = append(h.report.Memory, res)
		h.logf("memory: %s: %.0f B per reference request (used_memory delta over %d requests; %s)",
			s.name, res.Figure(), res.N, time.Since(t0).Round(100*time.Millisecond))
	}
	h.resumeAll()
	return h.redis.rdb.FlushAll(ctx).Err()
}

// lifecycles takes n reference requests of tenant through create -> processing -> complete.
func (h *harness) lifecycles(ctx context.Context, s *server, tenant, key string, n int) error {
	cl := newHTTPClient(s.addr, h.cfg.Concurrency)
	defer cl.close()
	hdr := s.auth(tenant, key)
	return parallel(ctx, n, h.cfg.Concurrency, func(int) error {
		st, body, err := cl.do("POST", "/v1/requests", h.ref.Create, hdr...)
		if err != nil {
			return err
		}
		id := createdID(body)
		if st != 202 || id == "" {
			return fmt.Errorf("create answered %d: %s", st, truncate(string(body), 300))
		}
		for _, step := range []struct {
			path string
			body []byte
		}{{"/processing", h.ref.Processing}, {"/complete", h.ref.Complete}} {
			st, body, err := cl.do("POST", "/v1/requests/"+id+step.path, step.body, hdr...)
			if err != nil {
				return err
			}
			if st != 200 {
				return fmt.Errorf("%s answered %d: %s", step.path, st, truncate(string(body), 300))
			}
		}
		return nil
	})
}

func (h *harness) memoryOf(ctx context.Context, s *server, keys map[string]string) (MemResult, error) {
	res := MemResult{Server: s.name, N: h.cfg.MemN}
	if err := h.lifecycles(ctx, s, tenantMemWarm, keys[tenantMemWarm], h.cfg.MemWarm); err != nil {
		return res, fmt.Errorf("warm-up: %w", err)
	}
	// Sizing every key first leaves the admin connection's buffers large; let
	// Redis shrink them (clientsCron) before the first reading.
	before, err := h.keyUsage(ctx)
	if err != nil {
		return res, err
	}
	settle := func() { time.Sleep(500 * time.Millisecond) }
	settle()
	m0, err := h.redis.info(ctx, "memory")
	if err != nil {
		return res, err
	}
	n0, err := h.redis.rdb.DBSize(ctx).Result()
	if err != nil {
		return res, err
	}
	if err := h.lifecycles(ctx, s, tenantMem, keys[tenantMem], h.cfg.MemN); err != nil {
		return res, err
	}
	settle()
	m1, err := h.redis.info(ctx, "memory")
	if err != nil {
		return res, err
	}
	n1, err := h.redis.rdb.DBSize(ctx).Result()
	if err != nil {
		return res, err
	}
	after, err := h.keyUsage(ctx)
	if err != nil {
		return res, err
	}
	res.UsedDelta = infoInt(m1, "used_memory") - infoInt(m0, "used_memory")
	res.ClientsDelta = infoInt(m1, "mem_clients_normal") - infoInt(m0, "mem_clients_normal")
	res.NewKeys = n1 - n0

	kinds := map[string]*KindUsage{}
	sample := map[string]string{}
	for k, b := range after {
		if strings.Contains(k, "{"+tenantMemWarm+"}") {
			continue
		}
		d := b - before[k]
		if _, existed := before[k]; existed && d == 0 {
			continue
		}
		p := keyPattern(k)
		ku := kinds[p]
		if ku == nil {
			ku = &KindUsage{Pattern: p}
			kinds[p] = ku
			sample[p] = k
		}
		if _, existed := before[k]; !existed {
			ku.Keys++
		}
		ku.Bytes += d
	}
	for p, ku := range kinds {
		ku.What = h.describe(ctx, sample[p])
		res.Kinds = append(res.Kinds, *ku)
		if strings.Contains(p, ":r:<id>") {
			res.Record = h.describeRecord(ctx, sample[p])
		}
	}
	sort.Slice(res.Kinds, func(i, j int) bool { return res.Kinds[i].Bytes > res.Kinds[j].Bytes })
	return res, nil
}

// keyUsage sizes every key of the database (MEMORY USAGE ... SAMPLES 0: exact).
// The memory figure runs on a Redis holding only its own few thousand keys.
func (h *harness) keyUsage(ctx context.Context) (map[string]int64, error) {
	var all []string
	iter := h.redis.rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		all = append(all, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	return h.usageOf(ctx, all)
}

func (h *harness) usageOf(ctx context.Context, keys []string) (map[string]int64, error) {
	out := make(map[string]int64, len(keys))
	for start := 0; start < len(keys); start += 1000 {
		batch := keys[start:min(start+1000, len(keys))]
		cmds := make([]*redis.IntCmd, len(batch))
		_, err := h.redis.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range batch {
				cmds[i] = p.MemoryUsage(ctx, k, 0)
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return nil, fmt.Errorf("MEMORY USAGE: %w", err)
		}
		for i, c := range cmds {
			if v, err := c.Result(); err == nil {
				out[batch[i]] = v
			}
		}
	}
	return out, nil
}

var (
	uuidPattern   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	digestPattern = regexp.MustCompile(`\b[0-9a-f]{16,}\b`)
	keyIDPattern  = regexp.MustCompile(`key_[a-z2-7]{16}`)
	tagPattern    = regexp.MustCompile(`\{[^}]*\}`)
	msPattern     = regexp.MustCompile(`:[0-9]{10,}$`) // retention bucket ends
)

// keyPattern names a key's kind: tenant, ids and digests replaced.
func keyPattern(k string) string {
	k = tagPattern.ReplaceAllString(k, "{T}")
	k = uuidPattern.ReplaceAllString(k, "<id>")
	k = keyIDPattern.ReplaceAllString(k, "<key-id>")
	k = msPattern.ReplaceAllString(k, ":<ms>")
	return digestPattern.ReplaceAllString(k, "<digest>")
}

// describe is a key's type and encoding, e.g. "hash, hashtable".
func (h *harness) describe(ctx context.Context, key string) string {
	t, _ := h.redis.rdb.Type(ctx, key).Result()
	enc, _ := h.redis.rdb.ObjectEncoding(ctx, key).Result()
	ttl, _ := h.redis.rdb.PTTL(ctx, key).Result()
	out := t + ", " + enc
	if ttl > 0 {
		out += ", TTL"
	}
	return out
}

// recordFieldNames name the fields of asyncstatus's string record, in order
// (scripts/lua/lib.lua documents the layout).
var recordFieldNames = []string{"s", "v", "t", "ex", "b", "ua", "co", "ev", "rt", "c", "g", "r", "f", "x"}

// describeRecord lists a record's fields with their value sizes, largest first.
// For a hash: values over hash-max-listpack-value (64 bytes by default) turn it
// from a listpack into a hashtable, which costs far more per field. For
// asyncstatus's string record: its fields, separated by one byte each.
func (h *harness) describeRecord(ctx context.Context, key string) string {
	typ, _ := h.redis.rdb.Type(ctx, key).Result()
	m := map[string]string{}
	switch typ {
	case "hash":
		var err error
		if m, err = h.redis.rdb.HGetAll(ctx, key).Result(); err != nil {
			return ""
		}
	case "string":
		v, err := h.redis.rdb.Get(ctx, key).Result()
		if err != nil {
			return ""
		}
		for i, f := range strings.Split(v, "\x1f") {
			name := fmt.Sprintf("#%d", i)
			if i < len(recordFieldNames) {
				name = recordFieldNames[i]
			}
			m[name] = f
		}
	default:
		return ""
	}
	type f struct {
		name string
		n    int
	}
	var fs []f
	total := 0
	for k, v := range m {
		fs = append(fs, f{k, len(v)})
		total += len(v)
		if typ == "hash" {
			total += len(k)
		} else {
			total++ // the separator
		}
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].n > fs[j].n || fs[i].n == fs[j].n && fs[i].name < fs[j].name })
	parts := make([]string, len(fs))
	for i, x := range fs {
		parts[i] = fmt.Sprintf("%s %d", x.name, x.n)
	}
	enc, _ := h.redis.rdb.ObjectEncoding(ctx, key).Result()
	what := "names and values"
	if typ == "string" {
		what = "values and separators"
		total-- // n fields, n-1 separators
	}
	return fmt.Sprintf("%s %s; %d fields, %d bytes of %s; value bytes: %s", typ, enc, len(m), total, what, strings.Join(parts, ", "))
}

// measureIdempotency sizes the Idempotency-Key entries the create scenario left:
// they are not part of the reference request (which sends none) but every create
// that sends the header pays for one for idempotency.ttl.
func (h *harness) measureIdempotency(ctx context.Context) error {
	var keys []string
	iter := h.redis.rdb.Scan(ctx, 0, h.as.data.prefix+":{"+tenantWrite+"}:ik:*", 1000).Iterator()
	for iter.Next(ctx) && len(keys) < 1000 {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		h.report.Problems = append(h.report.Problems, "no idempotency entry found after the create scenario (pattern "+
			h.as.data.prefix+":{"+tenantWrite+"}:ik:*): the key schema changed; update bench/load/memory.go")
		return nil
	}
	u, err := h.usageOf(ctx, keys)
	if err != nil {
		return err
	}
	var total int64
	for _, b := range u {
		total += b
	}
	for i := range h.report.Memory {
		m := &h.report.Memory[i]
		if m.Server != h.as.name {
			continue
		}
		per := float64(total) / float64(len(u))
		m.Kinds = append(m.Kinds, KindUsage{Pattern: keyPattern(keys[0]), What: h.describe(ctx, keys[0]),
			Keys: m.N, Bytes: int64(per * float64(m.N)), Extra: true,
			ExtraWhy: fmt.Sprintf("only when the create sends Idempotency-Key; sized on %d entries of the create scenario", len(u))})
	}
	return nil
}
