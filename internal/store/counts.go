package store

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
)

// Counts answers the exact numbers of tenant's requests in each status under
// f's type, label selector (one term) and time bounds (docs/reference.md
// §16): one counts.lua call per server holding shards (shardGroups), all in
// one pipeline, as a listing's first round; the call holding shard 0 counts
// it as one read. Records past retention never count, even before the
// sweeper has removed their index entries (counts.lua).
func (s *Store) Counts(ctx context.Context, f domain.ListFilter) (domain.StatusCounts, error) {
	tenant := f.Tenant
	minScore, maxScore := "-inf", "+inf"
	if f.CreatedAfter != nil {
		ms := f.CreatedAfter.UnixMilli()
		if f.CreatedAfter.After(time.UnixMilli(ms)) {
			ms++
		}
		minScore = strconv.FormatInt(ms, 10)
	}
	if f.CreatedBefore != nil {
		maxScore = strconv.FormatInt(f.CreatedBefore.UnixMilli(), 10)
	}
	tags := s.tenantTags(tenant)
	now := s.now()
	horizon := strconv.FormatInt(now.Add(s.opts.RetentionBucket).UnixMilli(), 10)
	calls := func(groups [][]int) []scriptCall {
		out := make([]scriptCall, len(groups))
		for i, g := range groups {
			args := make([]any, 0, 6+5*len(g))
			args = append(args, ms(now), f.Type, string(f.LabelSelector), minScore, maxScore, horizon)
			for _, n := range g {
				t := tags[n]
				args = append(args, s.k.meta(t), s.k.indexPrefix(t), s.k.retentionBuckets(t), s.k.retentionBucketPrefix(t), s.k.recordPrefix(t))
			}
			keys := []string{s.k.meta(tags[g[0]])}
			if g[0] == 0 {
				keys = s.counters(tags[0], ratelimit.ScopeRead, f.Credential).appendTo(keys)
			}
			out[i] = scriptCall{keys: keys, args: args}
		}
		return out
	}
	groups := s.shardGroups(ctx, tags)
	replies, err := s.runEach(ctx, s.sc.counts, calls(groups))
	if err != nil && len(groups) < len(tags) && movedSlot(err) {
		groups = singleShards(len(tags))
		replies, err = s.runEach(ctx, s.sc.counts, calls(groups))
	}
	if err != nil {
		return domain.StatusCounts{}, backend("count requests", err)
	}
	setRate(f.Rate, replies[0])
	var n [6]int64
	for _, r := range replies {
		if err := s.outcome("count requests", "", r, codeOK); err != nil {
			return domain.StatusCounts{}, err
		}
		if len(r.rest) != 6 {
			return domain.StatusCounts{}, unexpected("count requests", r)
		}
		for i, v := range r.rest {
			c, ok := v.(int64)
			if !ok || c < 0 || c > math.MaxInt32*int64(len(tags)) {
				return domain.StatusCounts{}, backend("count requests", fmt.Errorf("count %v", v))
			}
			n[i] += c
		}
	}
	return domain.StatusCounts{Queued: n[0], Processing: n[1], Succeeded: n[2], Failed: n[3], Cancelled: n[4], Expired: n[5]}, nil
}
