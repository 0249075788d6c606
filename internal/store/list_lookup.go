package store

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
)

// lookup answers a lookup by ids (ListFilter.IDs, docs/reference.md §16):
// the tenant's visible requests among f.IDs, newest first, on one page. An id
// names its shard, so each id's record key is known without a read: one
// lookup.lua call per server holding any of them (shardGroups), all in one
// pipeline, plus the call holding shard 0, which counts the lookup as one read
// per id asked and, as every call, refuses a frozen tenant. An id that is
// malformed, unknown, another tenant's, deleted or past retention is simply
// absent. (An id written before shards whose random bytes pass the shard
// check, once in 2^24, is looked for in the shard it seems to name only.)
func (s *Store) lookup(ctx context.Context, tenant string, f domain.ListFilter) (*domain.ListPage, error) {
	tags := s.tenantTags(tenant)
	byShard := map[int][]string{}
	seen := map[string]bool{}
	for _, id := range f.IDs {
		if !validID(id) || seen[id] {
			continue
		}
		seen[id] = true
		byShard[shardOf(id)] = append(byShard[shardOf(id)], id)
	}
	groups := s.shardGroups(ctx, tags)
	for sh := range byShard { // a shard at or above S (S was lowered): a call of its own
		if sh >= len(tags) {
			groups = append(groups, []int{sh})
		}
	}
	page, err := s.lookupIn(ctx, tenant, f, groups, byShard)
	if err != nil && len(groups) > 1 && movedSlot(err) {
		page, err = s.lookupIn(ctx, tenant, f, singleShards(max(len(tags), slices.Max(append(keysOf(byShard), 0))+1)), byShard)
	}
	return page, err
}

func keysOf(m map[int][]string) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (s *Store) lookupIn(ctx context.Context, tenant string, f domain.ListFilter, groups [][]int, byShard map[int][]string) (*domain.ListPage, error) {
	now := ms(s.now())
	var calls []scriptCall
	var asked [][]string // per call, the ids of its record keys
	for _, g := range groups {
		counts := slices.Contains(g, 0)
		var ids []string
		for _, sh := range g {
			ids = append(ids, byShard[sh]...)
		}
		if len(ids) == 0 && !counts {
			continue
		}
		keys := []string{s.k.meta(s.tag(tenant, g[0]))}
		if counts {
			keys = s.counters(s.tag(tenant, 0), ratelimit.ScopeRead, f.Credential).appendTo(keys)
		}
		args := make([]any, 0, 3+len(g)+len(ids))
		args = append(args, now, strconv.Itoa(len(f.IDs)), strconv.Itoa(len(g)))
		for _, sh := range g {
			args = append(args, s.k.meta(s.tag(tenant, sh)))
		}
		for _, sh := range g {
			for _, id := range byShard[sh] {
				args = append(args, s.k.record(s.tag(tenant, sh), id))
			}
		}
		if counts { // the counting call first, so that its reply is replies[0]
			calls = append([]scriptCall{{keys: keys, args: args}}, calls...)
			asked = append([][]string{ids}, asked...)
		} else {
			calls = append(calls, scriptCall{keys: keys, args: args})
			asked = append(asked, ids)
		}
	}
	replies, err := s.runEach(ctx, s.sc.lookup, calls)
	if err != nil {
		return nil, backend("look up requests", err)
	}
	setRate(f.Rate, replies[0])
	page := &domain.ListPage{Items: []*domain.Request{}}
	nowMs := s.now().UnixMilli()
	for i, r := range replies {
		if err := s.outcome("look up requests", "", r, codeOK); err != nil {
			return nil, err
		}
		if len(r.rest) != len(asked[i]) {
			return nil, unexpected("look up requests", r)
		}
		for j, v := range r.rest {
			rec, ok := v.(string)
			if !ok {
				continue
			}
			req, err := decodeRecord(asked[i][j], rec, false)
			if err == nil && (req.ExpiresAt == nil || req.ExpiresAt.UnixMilli() > nowMs) {
				page.Items = append(page.Items, req)
			}
		}
	}
	// newest first: ids order as (created_at, id)
	slices.SortFunc(page.Items, func(a, b *domain.Request) int { return strings.Compare(b.ID, a.ID) })
	return page, nil
}
