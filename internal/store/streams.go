package store

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Consumer-group reads shared by the webhook outbox and the audit streams:
// both are one stream per tenant, read by every replica through one group.

// readNew reads, for consumer of group, up to count(t) new entries (XREADGROUP
// ">") of each tenant's stream named by stream(t), pipelined a chunk of tenants
// at a time. A stream without the group (first use, or the stream was pruned)
// gets it, made from the start so that entries written before it are read too,
// and is read again. It returns each tenant's entries, and the first error
// (wrapped as op) while still reading the other tenants.
func (s *Store) readNew(ctx context.Context, op, group, consumer string, tenants []domain.ShardName, stream func(domain.ShardName) string, count func(domain.ShardName) int64) (map[domain.ShardName][]redis.XMessage, error) {
	out := map[domain.ShardName][]redis.XMessage{}
	var firstErr error
	read := func(ts []domain.ShardName) (missing []domain.ShardName) {
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		defer cancel()
		cmds := make([]*redis.XStreamSliceCmd, len(ts))
		_, _ = s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, t := range ts {
				cmds[i] = p.XReadGroup(cctx, &redis.XReadGroupArgs{Group: group, Consumer: consumer,
					Streams: []string{stream(t), ">"}, Count: count(t), Block: -1})
			}
			return nil
		})
		for i, c := range cmds {
			res, err := c.Result()
			switch {
			case err == nil:
				for _, st := range res {
					out[ts[i]] = append(out[ts[i]], st.Messages...)
				}
			case errors.Is(err, redis.Nil):
			case strings.HasPrefix(err.Error(), "NOGROUP"):
				missing = append(missing, ts[i])
			default:
				if firstErr == nil {
					firstErr = backend(op, err)
				}
			}
		}
		return missing
	}
	for len(tenants) > 0 {
		chunk := tenants[:min(len(tenants), pipelineBatch/2)]
		tenants = tenants[len(chunk):]
		if missing := read(chunk); len(missing) > 0 {
			s.createGroups(ctx, group, missing, stream)
			read(missing)
		}
	}
	return out, firstErr
}

// createGroups makes group on each tenant's stream, reading from the start.
func (s *Store) createGroups(ctx context.Context, group string, tenants []domain.ShardName, stream func(domain.ShardName) string) {
	cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	_, _ = s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
		for _, t := range tenants {
			p.XGroupCreateMkStream(cctx, stream(t), group, "0") // BUSYGROUP: a replica was first
		}
		return nil
	})
}

// decodeStream decodes the entries xs of stream, read through group, with
// decode. An entry that does not decode (written by hand, or by a later
// version) is acknowledged and deleted (dropEntries), so that it is not handed
// out again and again.
func decodeStream[T any](ctx context.Context, s *Store, stream, group string, xs []redis.XMessage, decode func(redis.XMessage) (T, bool)) []T {
	out := make([]T, 0, len(xs))
	var bad []string
	for _, x := range xs {
		if v, ok := decode(x); ok {
			out = append(out, v)
		} else {
			bad = append(bad, x.ID)
		}
	}
	s.dropEntries(ctx, stream, group, bad)
	return out
}

// eachPipelined sends cmd's command for each item, pipelineBatch items per
// pipeline, each pipeline bounded by OpTimeout, and returns the commands in
// items' order. redis.Nil (a missing key) is an answer, not an error.
func eachPipelined[T any, C redis.Cmder](ctx context.Context, s *Store, items []T, cmd func(ctx context.Context, p redis.Pipeliner, item T) C) ([]C, error) {
	out := make([]C, 0, len(items))
	for len(items) > 0 {
		chunk := items[:min(len(items), pipelineBatch)]
		items = items[len(chunk):]
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		_, err := s.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
			for _, it := range chunk {
				out = append(out, cmd(cctx, p, it))
			}
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
	}
	return out, nil
}

// dropEntries acknowledges and deletes entries that do not decode (written by
// hand, or by a later version), so that they are not handed out again and again.
func (s *Store) dropEntries(ctx context.Context, stream, group string, ids []string) {
	if len(ids) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	_, _ = s.rdb.TxPipelined(cctx, func(p redis.Pipeliner) error {
		p.XAck(cctx, stream, group, ids...)
		p.XDel(cctx, stream, ids...)
		return nil
	})
}
