package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// listRounds bounds the list script calls one page may take: a round comes out
// short when records changed or vanished between the script and the read.
const listRounds = 4

// position is where a listing stands: the last examined entry, in the order
// created_at descending, id descending. Neither ever changes for a record, so a
// position stays meaningful while records are created, transitioned or removed.
type position struct {
	ms int64
	id string
}

// List answers one page of a tenant's requests, newest first (docs/reference.md §4). See
// scripts/lua/list.lua for the plan and docs/listing.md for the costs.
func (s *Store) List(ctx context.Context, f domain.ListFilter) (*domain.ListPage, error) {
	tenant := f.Tenant
	if f.IDs != nil {
		return s.lookup(ctx, tenant, f) // list_lookup.go
	}
	return s.list(ctx, tenant, f, nil)
}

// list is List; also, when not nil, adds commands of its own to each pipeline
// that reads the page's records (ReadTenantPage, console_page.go).
func (s *Store) list(ctx context.Context, tenant string, f domain.ListFilter, also func(redis.Pipeliner)) (*domain.ListPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = domain.DefaultListLimit
	}
	limit = min(limit, domain.MaxListLimit)
	digest := filterDigest(tenant, f)
	var pos *position
	if f.Cursor != "" {
		p, ok := decodeCursor(f.Cursor, digest)
		if !ok {
			return nil, domain.ErrInvalidCursor()
		}
		pos = &p
	}

	minScore, maxMs := "-inf", int64(math.MaxInt64)
	if f.CreatedAfter != nil {
		// inclusive, and created_at has millisecond precision: round up
		ms := f.CreatedAfter.UnixMilli()
		if f.CreatedAfter.After(time.UnixMilli(ms)) {
			ms++
		}
		minScore = strconv.FormatInt(ms, 10)
	}
	if f.CreatedBefore != nil {
		maxMs = f.CreatedBefore.UnixMilli() // inclusive: UnixMilli rounds down
	}

	tags := s.tenantTags(tenant)
	statuses := f.Statuses
	if len(statuses) == 0 {
		statuses = domain.Statuses[:]
	}
	letters := ""
	for _, st := range statuses {
		letters += statusCode[st]
	}
	wantStatus := map[domain.Status]bool{}
	for _, st := range f.Statuses {
		wantStatus[st] = true
	}

	// The lazy plan (list.lua) needs every writer to keep the index-head
	// summary; a deployment runs S > 1 only once every replica runs this
	// version (a Cluster upgrading pins S = 1 for its rollout:
	// docs/operations.md), so it is used there. One shard reads its indexes
	// directly: there is nothing to merge.
	q := listQuery{tags: tags, letters: letters, typ: f.Type, minScore: minScore, lazy: len(tags) > 1 && f.Type == "",
		labels: string(f.LabelSelector)}
	groups := s.shardGroups(ctx, tags)
	page := &domain.ListPage{Items: make([]*domain.Request, 0, limit)}
	more := false
	for round := 0; round < listRounds && len(page.Items) < limit; round++ {
		q.maxScore, q.cID = "+inf", ""
		top := maxMs
		if pos != nil {
			top = min(top, pos.ms)
			q.cID = pos.id
		}
		if top != math.MaxInt64 {
			q.maxScore = strconv.FormatInt(top, 10)
		}
		want := limit - len(page.Items)
		replies, err := s.runList(ctx, s.listCalls(q, groups, round, want), round == 0, tags[0], f)
		if err != nil && len(groups) < len(tags) && movedSlot(err) {
			// A slot moved since the slot map was read: shard by shard. (When
			// the call holding shard 0 had succeeded, it counted the listing,
			// which this round counts again: twice, while a slot moves.)
			groups = singleShards(len(tags))
			replies, err = s.runList(ctx, s.listCalls(q, groups, round, want), round == 0, tags[0], f)
		}
		if err != nil {
			return nil, backend("list requests", err)
		}
		// Each call answered its next ask ids after the position. An id is
		// safe on the page once it is at least the last id of every call that
		// has more (threshold): no shard holds an unseen id above that. With
		// ask = want (one call, or a later round) that keeps at least want ids.
		var all []listed
		threshold := ""
		more = false
		for i, r := range replies {
			if err := s.outcome("list requests", "", r, codeOK); err != nil {
				return nil, err
			}
			if len(r.rest) < 2 || len(r.rest)%2 != 0 {
				return nil, unexpected("list requests", r)
			}
			if m, _ := r.rest[0].(int64); m == 1 {
				more = true
				if last, _ := r.rest[1].(string); last > threshold {
					threshold = last
				}
			}
			for j := 2; j < len(r.rest); j += 2 {
				id, _ := r.rest[j].(string)
				n, _ := r.rest[j+1].(int64)
				if !validID(id) || n < 1 || int(n) > len(groups[i]) {
					return nil, backend("list requests", fmt.Errorf("index entry %q (shard %d) is not a request id of the call", id, n))
				}
				all = append(all, listed{id: id, shard: groups[i][n-1]})
			}
		}
		// ids order as (created_at, id): an entry's score is its id's millisecond
		// (list.lua relies on it too)
		slices.SortFunc(all, func(a, b listed) int { return strings.Compare(b.id, a.id) })
		if n := sort.Search(len(all), func(i int) bool { return all[i].id < threshold }); n < len(all) {
			all = all[:n] // the rest comes again in the next round
		}
		if len(all) > want {
			all, more = all[:want], true
		}
		if len(all) > 0 {
			last := all[len(all)-1].id
			ms, _ := idMillis(last)
			pos = &position{ms: ms, id: last}
		}
		reqs, err := s.hydrate(ctx, tenant, all, also)
		if err != nil {
			return nil, err
		}
		for _, req := range reqs {
			switch {
			case req == nil: // vanished, or past retention (hydrate)
			case len(wantStatus) > 0 && !wantStatus[req.Status]: // moved on since the script
			// (no type check: a request's type never changes, and it came from its type's index)
			default:
				page.Items = append(page.Items, req)
			}
		}
		if !more {
			break
		}
	}
	if more && pos != nil {
		c, err := encodeCursor(digest, *pos)
		if err != nil {
			return nil, backend("list requests", err)
		}
		page.NextCursor = c
	}
	return page, nil
}

// listQuery is what every list.lua call of a listing is given: the tenant's
// shard tags, the filters and, per round, the position (maxScore, cID).
type listQuery struct {
	tags                                  []string
	letters, typ, maxScore, minScore, cID string
	lazy                                  bool
	// labels are the label selector's terms: list_labels.lua takes them in
	// list.lua's ARGV[7] (the plan), "" for list.lua
	labels string
}

// listCalls are a round's list.lua calls, one per group of shards: the ids
// of the group's next entries below the position that match the filters, as
// many of want as shardAsk says.
func (s *Store) listCalls(q listQuery, groups [][]int, round, want int) []scriptCall {
	plan := ""
	if q.lazy {
		plan = "1"
	}
	if q.labels != "" {
		plan = q.labels
	}
	calls := make([]scriptCall, len(groups))
	for i, g := range groups {
		args := make([]any, 0, 8+3*len(g))
		// ARGV[8], now, is set by runList for the call that counts the listing
		ask := shardAsk(want, len(g), len(q.tags), len(groups), round)
		args = append(args, q.letters, q.typ, q.maxScore, q.minScore, q.cID, strconv.Itoa(ask), plan, "")
		for _, n := range g {
			args = append(args, s.k.meta(q.tags[n]), s.k.indexPrefix(q.tags[n]), s.k.indexHeads(q.tags[n]))
		}
		calls[i] = scriptCall{keys: []string{s.k.meta(q.tags[g[0]])}, args: args}
	}
	return calls
}

// shardAsk is how many ids a call reading group of a tenant's shards shards
// is asked for in a round of calls calls that wants want. A request is in a
// shard drawn at random (by its Idempotency-Key's digest: any shard evenly;
// without one, on a Cluster: a master evenly, then one of its shards), so
// how many of the page's next want ids a call holds is about binomial (want,
// p), p the larger of group/shards and 1/calls: the first round of several
// calls asks each for that mean plus three standard deviations, plus one (for
// a page of 50 over 16 shards: 10 of one shard, 31 of a third of them), so
// that a call's work follows its part of the page, not the page times the
// calls. A call holding more (one page in 1,600 over three masters, one in
// 300 shard by shard, from the binomial tails) makes the round short; the
// next round asks every call for want, as a call holding every shard always
// is.
func shardAsk(want, group, shards, calls, round int) int {
	if group >= shards || round > 0 {
		return want
	}
	p := max(float64(group)/float64(shards), 1/float64(calls))
	mean := float64(want) * p
	return min(want, int(math.Ceil(mean+3*math.Sqrt(mean*(1-p))))+1)
}

// shardGroups parts a tenant's shards (tags) into the groups one list call
// reads together: those one server holds. A plain client (single server,
// Sentinel, the embedded store) holds them all; a Cluster, per master, from
// its slot map (a slot that moves meanwhile fails the call, and the listing
// goes on shard by shard: movedSlot); any other client, one per call.
// Groups come in the order of their first shard, shards ascending in each,
// so shard 0 leads the first call.
func (s *Store) shardGroups(ctx context.Context, tags []string) [][]int {
	if s.staleGroups != nil {
		return s.staleGroups(len(tags))
	}
	switch c := s.rdb.(type) {
	case *redis.Client:
		all := make([]int, len(tags))
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	case *redis.ClusterClient:
		if len(tags) == 1 {
			return [][]int{{0}}
		}
		var groups [][]int
		at := map[string]int{} // master address -> place in groups
		for i, tag := range tags {
			m, err := c.MasterForKey(ctx, s.k.meta(tag))
			if err != nil {
				return singleShards(len(tags))
			}
			addr := m.Options().Addr
			g, ok := at[addr]
			if !ok {
				g = len(groups)
				at[addr] = g
				groups = append(groups, nil)
			}
			groups[g] = append(groups[g], i)
		}
		return groups
	}
	return singleShards(len(tags))
}

// singleShards is one group per shard.
func singleShards(n int) [][]int {
	out := make([][]int, n)
	for i := range out {
		out[i] = []int{i}
	}
	return out
}

// movedSlot tells a list call that reached a key of a slot its server no
// longer serves (the slot moved, or is moving, since the slot map was read).
func movedSlot(err error) bool {
	m := err.Error()
	return strings.Contains(m, "Script attempted to access") || strings.Contains(m, "Unable to execute command")
}

// listed is an id a shard's index gave, and that shard.
type listed struct {
	id    string
	shard int
}

// hydrate reads the records of ids, in their order: one MGET per shard (a
// shard's keys share its slot, so this also works on a cluster), all in one
// pipeline; one MGET for them all where one server holds every shard (a
// plain client: single server, Sentinel, embedded; no slot or ring rule to
// keep). A vanished record, or one past its retention, is nil. also, when not
// nil, adds its commands to the first pipeline (ReadTenantPage).
func (s *Store) hydrate(ctx context.Context, tenant string, ids []listed, also func(redis.Pipeliner)) ([]*domain.Request, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	_, single := s.rdb.(*redis.Client)
	byGroup := map[int][]int{} // shard (or 0 for all) -> positions in ids
	var order []int
	for i, l := range ids {
		g := 0
		if !single {
			g = l.shard
		}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], i)
	}
	vals := make([]any, len(ids))
	cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	cmds := make([]*redis.SliceCmd, len(order))
	_, err := s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
		if also != nil {
			also(p)
		}
		for j, g := range order {
			keys := make([]string, len(byGroup[g]))
			for n, i := range byGroup[g] {
				keys[n] = s.k.record(s.tag(tenant, ids[i].shard), ids[i].id)
			}
			cmds[j] = p.MGet(cctx, keys...)
		}
		return nil
	})
	if err != nil {
		return nil, backend("list requests: read records", err)
	}
	for j, g := range order {
		for n, v := range cmds[j].Val() {
			vals[byGroup[g][n]] = v
		}
	}
	now := s.now().UnixMilli()
	out := make([]*domain.Request, len(ids))
	for i, v := range vals {
		rec, ok := v.(string)
		if !ok {
			continue
		}
		// listings do not carry events
		if req, err := decodeRecord(ids[i].id, rec, false); err == nil && (req.ExpiresAt == nil || req.ExpiresAt.UnixMilli() > now) {
			out[i] = req
		}
	}
	return out, nil
}

// Cursors are base64url of: version (1 byte), filter digest (8), created_at ms
// (8, big endian), id (16), then the first 8 bytes of an HMAC-SHA256 of all that.
// The MAC key is fixed: it detects garbling and tampering by accident, not by
// intent; a forged cursor could only name a position in the caller's own listing.
const cursorVersion = 1

var cursorKey = []byte("asyncstatus list cursor v1")

const cursorLen = 1 + 8 + 8 + 16 + 8

// filterDigest binds a cursor to the tenant and to the filter set (not to the page
// size, which may change from page to page).
func filterDigest(tenant string, f domain.ListFilter) [8]byte {
	var b strings.Builder
	b.WriteString(tenant)
	b.WriteString("\x00")
	b.WriteString(f.Type)
	b.WriteString("\x00")
	for _, st := range f.Statuses { // sorted and unique (wire.DecodeListQuery)
		b.WriteString(string(st) + ",")
	}
	if f.LabelSelector != "" { // absent, the digest is the one of cursors made before labels
		b.WriteString("\x00l:" + string(f.LabelSelector))
	}
	for _, t := range []*time.Time{f.CreatedAfter, f.CreatedBefore} {
		b.WriteString("\x00")
		if t != nil {
			b.WriteString(strconv.FormatInt(t.UnixNano(), 10))
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	var d [8]byte
	copy(d[:], sum[:8])
	return d
}

func encodeCursor(digest [8]byte, p position) (string, error) {
	u, err := uuid.Parse(p.id)
	if err != nil {
		return "", fmt.Errorf("index entry %q is not a request id", p.id)
	}
	buf := make([]byte, 0, cursorLen)
	buf = append(buf, cursorVersion)
	buf = append(buf, digest[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(p.ms))
	buf = append(buf, u[:]...)
	mac := hmac.New(sha256.New, cursorKey)
	mac.Write(buf)
	buf = append(buf, mac.Sum(nil)[:8]...)
	return base64.RawURLEncoding.EncodeToString(buf), nil
}

func decodeCursor(c string, digest [8]byte) (position, bool) {
	buf, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(buf) != cursorLen || buf[0] != cursorVersion {
		return position{}, false
	}
	mac := hmac.New(sha256.New, cursorKey)
	mac.Write(buf[:cursorLen-8])
	if !hmac.Equal(mac.Sum(nil)[:8], buf[cursorLen-8:]) {
		return position{}, false
	}
	if !hmac.Equal(buf[1:9], digest[:]) {
		return position{}, false
	}
	ms := int64(binary.BigEndian.Uint64(buf[9:17]))
	u, err := uuid.FromBytes(buf[17:33])
	if err != nil || ms < 0 {
		return position{}, false
	}
	return position{ms: ms, id: u.String()}, true
}
