package store

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// ReadTenantPage reads what the console's requests page shows, in about the
// time of List alone (docs/reference.md §14: "a page of 50 requests renders in about the
// time of one list call"): List(f), TenantSummary of f.Tenant and, when
// sessionDigest is not "", the console session stored under it. The summary's
// and the session's commands ride the pipeline that reads the page's records,
// so they cost no round trip of their own; they get one when no record is read
// (an empty or refused page). err is the summary's failure; the listing's and
// the session's are in the page.
func (s *Store) ReadTenantPage(ctx context.Context, f domain.ListFilter, sessionDigest string) (domain.TenantPage, error) {
	tenant := f.Tenant
	var out domain.TenantPage
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	known := s.knownTypes(tenant)
	var (
		queued bool
		metas  []*redis.MapStringStringCmd
		probes []indexProbe
		sess   *redis.MapStringStringCmd
	)
	// list calls it for every pipeline of records it sends: the first carries
	// the commands
	also := func(p redis.Pipeliner) {
		if queued {
			return
		}
		queued = true
		metas = s.queueMetas(ctx, p, tenant)
		probes = s.queueProbes(ctx, p, s.tenantTags(tenant), known, nil)
		if sessionDigest != "" {
			sess = p.HGetAll(ctx, s.k.consoleSession(sessionDigest))
		}
	}
	out.Page, out.ListErr = s.list(ctx, tenant, f, also)
	if !queued {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { also(p); return nil })
		if err != nil && !errors.Is(err, redis.Nil) {
			return out, backend("summarise tenant "+tenant, err)
		}
	}
	if sess != nil {
		out.Session, out.SessionErr = s.consoleSession(sess)
	}
	if err := summaryErr(metas, probes); err != nil {
		return out, backend("summarise tenant "+tenant, err)
	}
	sum, err := s.summarise(ctx, tenant, known, metas, probes)
	out.Summary = sum
	return out, err
}

// summaryErr is the first failure among a summary's commands.
func summaryErr(metas []*redis.MapStringStringCmd, probes []indexProbe) error {
	failed := func(err error) bool { return err != nil && !errors.Is(err, redis.Nil) }
	for _, m := range metas {
		if failed(m.Err()) {
			return m.Err()
		}
	}
	for _, pr := range probes {
		if failed(pr.card.Err()) {
			return pr.card.Err()
		}
		if pr.oldest != nil && failed(pr.oldest.Err()) {
			return pr.oldest.Err()
		}
	}
	return nil
}
