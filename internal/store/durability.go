package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Durability of acknowledged writes (docs/reference.md §11).
//
// A write is acknowledged (2xx) only after Redis has applied it atomically: one Lua
// script. With Options.WaitReplicas = n > 0 it is acknowledged only after
// `WAIT n timeout` confirms that n replicas have it too. WAIT counts the replicas
// that acknowledged the replication offset of the *connection's* last write, so it
// must be sent on the connection that ran the script: the script and the WAIT go
// in one pipeline to one node (the tenant slot's master on a cluster).
//
// Between the script and the WAIT the pipeline writes a tiny barrier key in the
// tenant's slot (barrierKey). A script that wrote nothing - an idempotent replay
// of a write whose first answer was a 503, say - would otherwise leave the
// connection's offset wherever an earlier, unrelated write left it, and WAIT would
// confirm nothing about the write being replayed. The barrier moves the offset
// past everything the master has applied, the replayed write included.

// barrierTTL is how long a write barrier key lives: one key per active tenant.
const barrierTTL = 10 * time.Second

// acknowledgedWrite reports whether a script's outcome is a write that a caller
// is told succeeded: create, the transitions (also the sweeper's timeouts) and
// delete. The sweeper's index cleanup and retention reapply answer nobody.
func (s *Store) acknowledgedWrite(sc *script) bool { return sc.ack }

// waitsForReplicas reports whether calls of sc go through runReplicated.
func (s *Store) waitsForReplicas(sc *script) bool {
	return s.opts.WaitReplicas > 0 && s.acknowledgedWrite(sc)
}

// writeOutcome reports whether a script outcome acknowledges a write to the
// caller (made now, or replayed by an Idempotency-Key); the others (not found,
// frozen, already terminal, ...) wrote nothing and promise nothing.
func writeOutcome(code int64) bool { return code == codeOK || code == codeReplay }

// errNotReplicated is the answer when WAIT confirmed fewer replicas than asked.
func (s *Store) errNotReplicated(got int64, cause error) error {
	if cause == nil {
		cause = fmt.Errorf("WAIT %d %s confirmed %d replica(s)", s.opts.WaitReplicas, s.opts.WaitTimeout, got)
	}
	return &domain.Error{Code: domain.BackendUnavailable, RetryAfterSeconds: 1, Err: cause,
		Message: fmt.Sprintf("The write may or may not have been applied: the status store did not confirm it on %d replica(s) within %s. "+
			"Retrying with the same Idempotency-Key is safe.", s.opts.WaitReplicas, s.opts.WaitTimeout)}
}

// errOutcomeUnknown is the answer when a write script was (or may have been) sent
// and no answer came: Redis may have applied it.
func errOutcomeUnknown(cause error) error {
	return &domain.Error{Code: domain.BackendUnavailable, RetryAfterSeconds: 1, Err: cause,
		Message: "The status store did not answer in time: the write may or may not have been applied. " +
			"Retrying with the same Idempotency-Key is safe."}
}

// scriptFailed is what run returns for a failed script call. On a cluster, a node
// that stopped answering makes the client re-read the topology at once, so that a
// promoted replica is found within moments rather than at the next periodic
// reload. A write script that may have reached Redis says its outcome is unknown.
func (s *Store) scriptFailed(sc *script, err error) error {
	if isRedisDown(err) {
		s.reloadTopology()
	}
	if s.acknowledgedWrite(sc) && mayHaveRun(err) {
		return errOutcomeUnknown(err)
	}
	return err
}

// reloadTopology asks a cluster client to re-read the slot map (lazily, coalesced:
// go-redis runs at most one reload at a time with a short cool-down).
func (s *Store) reloadTopology() {
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

// mayHaveRun reports whether a failed call may still have been executed by
// Redis: an answer that never came (timeout, connection lost). A Redis error
// reply, a refused connection and an exhausted pool mean it did not run.
func mayHaveRun(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return false
	}
	return !notSent(err)
}

// notSent reports errors that prove the command never left the client.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection pool timeout") ||
		errors.Is(err, redis.ErrClosed)
}

// retryBeforeRun reports errors after which a cluster write may be sent again:
// the command was refused before it ran (wrong node, cluster reconfiguring, node
// unreachable), and a fresh topology may name the right node.
func retryBeforeRun(err error) bool {
	if _, moved := redis.IsMovedError(err); moved {
		return true
	}
	return redis.IsReadOnlyError(err) || redis.IsClusterDownError(err) || redis.IsTryAgainError(err) ||
		redis.IsMasterDownError(err) || redis.IsLoadingError(err) || notSent(err)
}

// barrierKey is the write barrier key in the same slot as key: "<prefix>:{T}:wb"
// for a key carrying the hash tag {T}; "" when key carries none.
func (s *Store) barrierKey(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return s.k.prefix + ":" + key[i:i+j+2] + ":wb"
}

// pipeliner is the part of a go-redis client that runWaited needs.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// writeNode is the client whose pipelines reach the master that owns key's slot
// over one connection: the client itself for a single Redis or a Sentinel-managed
// master, the slot's master node on a cluster.
func (s *Store) writeNode(ctx context.Context, key string) (pipeliner, error) {
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return s.rdb, nil
}

// runReplicated runs a write script, the write barrier and WAIT in one pipeline on
// one connection, and refuses to acknowledge a write outcome that WAIT did not
// confirm on Options.WaitReplicas replicas.
func (s *Store) runReplicated(ctx context.Context, sc *script, c scriptCall) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout+s.opts.WaitTimeout)
	defer cancel()
	start := time.Now()
	r, err := s.runWaited(ctx, sc, c)
	if o := s.opts.ScriptObserver; o != nil {
		o.ObserveScript(sc.name, time.Since(start), err)
	}
	return r, err
}

func (s *Store) runWaited(ctx context.Context, sc *script, c scriptCall) (reply, error) {
	first := c.firstKey()
	barrier := s.barrierKey(first)
	// EVALSHA first; EVAL once Redis says it lost its script cache. Each
	// attempt is a new command (a command keeps its answer) on the same
	// arguments.
	a, eval := scriptArgs(sc, c), false
	_, cluster := s.rdb.(*redis.ClusterClient)
	for attempt := 1; ; attempt++ {
		node, err := s.writeNode(ctx, first)
		if err != nil {
			return reply{}, s.scriptFailed(sc, err)
		}
		pipe := node.Pipeline()
		// Sent once (onceCmd): a pipeline that holds it is never resent by
		// go-redis, so a write whose answer was lost cannot run twice.
		run := redis.NewCmd(ctx, a...)
		_ = pipe.Process(ctx, onceCmd{run})
		if barrier != "" {
			pipe.Set(ctx, barrier, "1", barrierTTL)
		}
		// Pipeliner lacks Wait; in a pipeline the client's ReadTimeout (and ctx)
		// bound the reply, so the command is built by hand.
		wait := redis.NewIntCmd(ctx, "wait", s.opts.WaitReplicas, s.opts.WaitTimeout.Milliseconds())
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx) // each command carries its own error

		v, err := run.Result()
		switch {
		case err == nil:
		case !eval && redis.HasErrorPrefix(err, "NOSCRIPT"):
			a, eval = evalArgs(sc, a), true
			continue
		case cluster && attempt < 3 && retryBeforeRun(err) && s.pause(ctx, attempt):
			continue
		default:
			return reply{}, s.scriptFailed(sc, err)
		}
		r, err := decodeReply(v)
		if err != nil || !(writeOutcome(r.code) || r.code == codeTerminal) {
			return r, err
		}
		// A write outcome, or ALREADY_TERMINAL: its 409 tells the caller that the
		// request is over and how, and that state may be a write the replicas do
		// not have yet (one answered 503). It is answered once WAIT confirms
		// everything the master applied (the barrier), so that no failover can
		// lose the terminal state a 409 named.
		n, err := wait.Result()
		if err != nil {
			if isRedisDown(err) {
				s.reloadTopology()
			}
			return reply{}, s.errNotReplicated(0, fmt.Errorf("WAIT: %w", err))
		}
		if n < int64(s.opts.WaitReplicas) {
			return reply{}, s.errNotReplicated(n, nil)
		}
		return r, nil
	}
}

// pause waits a little before a cluster retry, while the topology reloads; false
// when ctx leaves no time for another attempt.
func (s *Store) pause(ctx context.Context, attempt int) bool {
	d := time.Duration(attempt) * 100 * time.Millisecond
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d+s.opts.WaitTimeout {
		return false
	}
	s.reloadTopology()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
