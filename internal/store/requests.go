package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
)

// The request operations: create, read, transition and delete, each one
// script call in the shard the request's id names.

// idemDigest is the hash naming an Idempotency-Key's entry (keys.idempotency);
// a create's also chooses the request's shard (newShard).
func idemDigest(op, id string, key domain.IdempotencyKey) []byte {
	// Spelled into a buffer on the stack (the heap only for a key of more
	// than about 200 bytes), not into a string made to be copied once more.
	var buf [256]byte
	b := append(buf[:0], op...)
	b = append(append(append(append(b, '\n'), id...), '\n'), key...)
	h := sha256.Sum256(b)
	return h[:16]
}

// fingerprint digests what a call asks for, to tell a replay from a reuse of the key.
//
// The parts, each followed by a zero byte, are hashed from one buffer on the
// stack (the heap only past its size) and the digest spelled into another:
// the string returned is the one allocation.
func fingerprint(parts ...string) string {
	var buf [1024]byte
	b := buf[:0]
	for _, p := range parts {
		b = append(append(b, p...), 0)
	}
	sum := sha256.Sum256(b)
	var hx [32]byte
	hex.Encode(hx[:], sum[:16])
	return string(hx[:])
}

// Create registers a new request. replay is true when an Idempotency-Key made the
// request earlier; the answer is then that request as it is now.
func (s *Store) Create(ctx context.Context, p domain.CreateParams) (req *domain.Request, replay bool, err error) {
	in := p.Input
	fp := "" // only an Idempotency-Key needs the body's digest
	if p.IdemKey != "" {
		fp = fingerprint("create", in.Type, string(in.Context), strconv.Itoa(in.EstimatedDurationSeconds), string(in.Labels))
	}
	stale := ""
	var digest []byte
	if p.IdemKey != "" {
		digest = idemDigest("create", "", p.IdemKey)
	}
	shard := s.newShard(ctx, p.Tenant, digest)
	tag := s.tag(p.Tenant, shard)
	tk := s.tagKeys(tag)
	kept := ""
	if t := s.opts.Tracer; t != nil {
		if kept = t.KeepContext(ctx); len(kept) > MaxTraceBytes || strings.IndexByte(kept, recordSep) >= 0 {
			kept = ""
		}
	}
	for attempt := 0; attempt < 2; attempt++ {
		u, err := uuid.NewV7()
		if err != nil {
			return nil, false, fmt.Errorf("create request: new id: %w", err)
		}
		markID(&u, shard)
		id := u.String()
		// created_at is the id's own timestamp, so that id order is creation order.
		created := uuidTime(u)
		a := createArgs{on: on{tag: tag, id: id, now: created.UnixMilli()}, rec: newRecord(in.Type, p.By, in.Context, in.Labels) + kept,
			fp: fp, stale: stale, typ: in.Type, by: p.By, labels: in.Labels}
		if attempt == 0 { // counted once: a retry after a stale idempotency entry is the same call
			a.rate = s.counters(tag, ratelimit.ScopeWrite, p.Credential)
		}
		if p.IdemKey != "" {
			a.idem = tk.idempotency(hex.EncodeToString(digest))
		}
		r, err := s.run(ctx, s.sc.create, a.call(tk))
		if err != nil {
			return nil, false, backend("create request", err)
		}
		setRate(p.Rate, r)
		if err := s.outcome("create request", id, r, codeOK, codeReplay); err != nil {
			return nil, false, err
		}
		switch r.code {
		case codeOK:
			s.registerTenant(ctx, p.Tenant)
			s.outboxHook.written(shardName(tag))
			s.auditHook.written(shardName(tag))
			return &domain.Request{ID: id, Type: in.Type, Status: domain.StatusQueued, Context: in.Context,
				Labels: in.Labels, CreatedBy: p.By, CreatedAt: domain.Time{Time: created}, UpdatedAt: domain.Time{Time: created}, Version: 1}, false, nil
		case codeReplay:
			pid := r.str
			res, err := s.read(ctx, domain.PollParams{Call: domain.Call{Tenant: p.Tenant}, ID: pid}, false)
			req := res.Request
			if domain.ErrorCode(err) == domain.NotFound {
				// The request the key made is gone (deleted or past retention): the key
				// may make a new one.
				stale = pid
				continue
			}
			return req, err == nil, err
		}
	}
	return nil, false, backend("create request", errors.New("idempotency entry kept changing"))
}

// on is what every call of a request script names: the request (its id,
// under hash tag tag), the call's time (unix ms), and the rate counters it
// is counted on.
//
// now goes into ARGV as an int64: go-redis writes it with strconv.AppendInt
// into its own buffer, the same digits ms would spell, so the scripts read
// the same string, without a string made and boxed per call.
type on struct {
	tag, id string
	now     int64
	rate    counters
}

// createArgs is what a create asks of create.lua; its now is created_at (the
// id's own).
type createArgs struct {
	on
	// rec is the record (newRecord).
	rec string
	// fp is the body's digest for the Idempotency-Key ("" without one); stale
	// an id an entry of that key may name and be taken over from.
	fp, stale string
	typ, by   string
	labels    domain.Labels
	// idem is the Idempotency-Key's key, "" without one.
	idem string
}

// call is create.lua's KEYS and ARGV, in its header's order.
// The keys are a.tag's, from t.
func (a createArgs) call(t *tagKeys) scriptCall {
	c := newCmdCall(9, 10)
	c.cmd = append(c.cmd, t.record(a.id), t.meta, t.index(domain.StatusQueued, a.typ),
		t.webhookFilter, t.outbox, t.audit)
	a.rate.addTo(&c)
	if a.idem != "" {
		c.addKey(a.idem)
	}
	c.endKeys()
	c.cmd = append(c.cmd, a.id, a.now, a.rec, a.fp, a.stale, a.typ, a.by, t.indexHeads,
		t.labelIndexPrefix, string(a.labels))
	return c
}

// uuidTime is the millisecond timestamp of a UUIDv7.
func uuidTime(u uuid.UUID) time.Time {
	msec := int64(u[0])<<40 | int64(u[1])<<32 | int64(u[2])<<24 | int64(u[3])<<16 | int64(u[4])<<8 | int64(u[5])
	return time.UnixMilli(msec).UTC()
}

func unexpected(op string, r reply) error {
	return backend(op, fmt.Errorf("unexpected script outcome %d", r.code))
}

// Poll reads a request for a caller and paces the caller (docs/reference.md §5) in the same
// Redis round trip; with Options.RateLimits it also counts the read rate limits
// there, and p.Rate receives what it counted, also on errors.
func (s *Store) Poll(ctx context.Context, p domain.PollParams) (domain.PollResult, error) {
	// a paced poll (a caller) never serves events: only unpaced reads parse them
	return s.read(ctx, p, p.Caller == domain.Unpaced)
}

// read runs poll.lua. Its reply is one string, the code digit, the rate limit
// when one was counted (decodeReply), then what parsePollReply reads: the
// retry_after or seconds left, and for code 0 the record.
// withEvents asks for the record's events to be decoded too.
//
// It reads in the shard the id names, then in shard 0 (atIDShard).
func (s *Store) read(ctx context.Context, p domain.PollParams, withEvents bool) (domain.PollResult, error) {
	if !validID(p.ID) {
		return domain.PollResult{}, domain.ErrNotFound()
	}
	res, _, _, err := atIDShard(s, p.Tenant, p.ID, func(tag string, first bool) (domain.PollResult, error) {
		return s.readAt(ctx, tag, p, withEvents, first) // counted once, by the first try
	})
	return res, err
}

// readAt is read in the shard of hash tag tag; count asks it to count the
// read rate limits (Options.RateLimits), on that shard's counters.
func (s *Store) readAt(ctx context.Context, tag string, p domain.PollParams, withEvents, count bool) (domain.PollResult, error) {
	var res domain.PollResult
	a := pollArgs{on: on{tag: tag, id: p.ID, now: s.now().UnixMilli()}, caller: p.Caller}
	if count {
		a.rate = s.counters(tag, ratelimit.ScopeRead, p.Credential)
	}
	r, err := s.run(ctx, s.sc.poll, a.call(s.k))
	if err != nil {
		return res, backend("read request "+p.ID, err)
	}
	setRate(p.Rate, r)
	pr, ok := parsePollReply(r.str)
	if !ok || (r.code == codeOK && !pr.hasRec) {
		return res, unexpected("read request", r)
	}
	r.rest = []any{pr.n} // the detail of its error codes
	if err := s.outcome("read request", p.ID, r, codeOK); err != nil {
		return res, err
	}
	res.RetryAfter = int(pr.n)
	res.Request, err = decodeRecord(p.ID, pr.rec, withEvents)
	return res, err
}

// pollArgs is what a read asks of poll.lua.
type pollArgs struct {
	on
	// caller is who is paced (domain.Unpaced: nobody).
	caller string
}

// call is poll.lua's KEYS and ARGV, in its header's order.
func (a pollArgs) call(k keys) scriptCall {
	keys := make([]string, 3, 5)
	keys[0], keys[1], keys[2] = k.record(a.tag, a.id), k.meta(a.tag), k.pacing(a.tag, a.id)
	return scriptCall{keys: a.rate.appendTo(keys), args: []any{a.now, a.caller}}
}

// pollReply is poll.lua's answer after its code digit and rate part.
type pollReply struct {
	n      int64 // retry_after, or the seconds left of an early poll
	rec    string
	hasRec bool
}

// parsePollReply reads ",<n>", then optionally "|" and the record (poll.lua's
// header); ok is false for anything else.
func parsePollReply(str string) (pr pollReply, ok bool) {
	head, rec, hasRec := strings.Cut(str, "|")
	head, more := strings.CutPrefix(head, ",")
	if !more {
		return pollReply{}, false
	}
	v, err := strconv.ParseInt(head, 10, 64)
	if err != nil {
		return pollReply{}, false
	}
	pr.n, pr.rec, pr.hasRec = v, rec, hasRec
	return pr, true
}

// toInt64 reads a script's number, sent as an integer or as a string.
func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// validID reports whether id is a canonical lower-case UUID, as the service makes
// them; anything else cannot exist and never reaches Redis. It runs on every poll
// and transition, so it scans the bytes instead of parsing and re-printing.
func validID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// Events lists a request's status changes, oldest first.
func (s *Store) Events(ctx context.Context, tenant, id string) ([]domain.Event, error) {
	res, err := s.ReadEvents(ctx, domain.PollParams{Call: domain.Call{Tenant: tenant}, ID: id})
	if err != nil {
		return nil, err
	}
	return res.Request.Events, nil
}

// ReadEvents reads a request with its events for a caller of the API, never
// paced (p.Caller is ignored); p.Credential, when set, is counted against the
// read limits in the same script, and p.Rate receives what was counted.
func (s *Store) ReadEvents(ctx context.Context, p domain.PollParams) (domain.PollResult, error) {
	p.Caller = ""
	return s.read(ctx, p, true)
}

// MarkProcessing moves a queued request to processing, or records a heartbeat and
// progress of a processing one.
func (s *Store) MarkProcessing(ctx context.Context, p domain.TransitionParams, in domain.ProgressInput) (*domain.Request, error) {
	return s.transition(ctx, p, transitionArgs{op: "processing", to: domain.StatusProcessing, payload: string(in.Progress)})
}

// Complete marks a request succeeded with its result.
func (s *Store) Complete(ctx context.Context, p domain.TransitionParams, in domain.CompleteInput) (*domain.Request, error) {
	return s.transition(ctx, p, transitionArgs{op: "complete", to: domain.StatusSucceeded, payload: string(in.Result), resultType: in.ResultType})
}

// Fail marks a request failed.
func (s *Store) Fail(ctx context.Context, p domain.TransitionParams, in domain.FailInput) (*domain.Request, error) {
	return s.transition(ctx, p, transitionArgs{op: "fail", to: domain.StatusFailed, payload: string(in.Failure)})
}

// Cancel marks a request cancelled.
func (s *Store) Cancel(ctx context.Context, p domain.TransitionParams, in domain.CancelInput) (*domain.Request, error) {
	payload := ""
	if in.Reason != "" {
		b, _ := json.Marshal(struct {
			Reason string `json:"reason"`
		}{in.Reason})
		payload = string(b)
	}
	return s.transition(ctx, p, transitionArgs{op: "cancel", to: domain.StatusCancelled, payload: payload})
}

// SystemActor is the "by" of transitions the service makes itself (timeouts).
const SystemActor = "system"

// expireQueued expires a request still queued past its queued timeout
// (counted from created_at, with the timeout configured now). done is false
// when there was nothing to do (it moved on, is not due, or is gone), gone
// when it is gone; tag, when not "", is the shard that holds it (the sweeper
// found it there).
func (s *Store) expireQueued(ctx context.Context, tag, tenant, id string) (done, gone bool, err error) {
	return s.timeout(ctx, tag, tenant, id, domain.StatusExpired, domain.StatusQueued, domain.FailureJSON("REQUEST_EXPIRED", "the request stayed queued longer than its queued timeout"))
}

// timeOutProcessing fails a processing request whose heartbeat stopped.
func (s *Store) timeOutProcessing(ctx context.Context, tag, tenant, id string) (done bool, err error) {
	done, _, err = s.timeout(ctx, tag, tenant, id, domain.StatusFailed, domain.StatusProcessing, domain.FailureJSON("ERR_JOB_EXECUTION_TIMED_OUT", "no heartbeat within the processing timeout"))
	return done, err
}

// queuedTimeout is the queued timeout of requests of type typ.
func (s *Store) queuedTimeout(typ string) time.Duration {
	if d, ok := s.opts.QueuedTimeoutByType[typ]; ok {
		return d
	}
	return s.opts.QueuedTimeout
}

func (s *Store) timeout(ctx context.Context, tag, tenant, id string, to, guard domain.Status, failure json.RawMessage) (done, gone bool, err error) {
	if t := s.opts.Tracer; t != nil {
		var end func(error)
		ctx, end = t.StartTimeout(ctx, id, string(to))
		defer func() { end(err) }()
	}
	p := domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: SystemActor}, ID: id}
	a := transitionArgs{op: "timeout", to: to, payload: string(failure), guard: guard}
	if tag == "" {
		_, err = s.transition(ctx, p, a)
	} else if validID(id) {
		_, err = s.transitionAt(ctx, tag, false, p, a)
		if err == nil && tag != s.idTag(tenant, id) {
			s.announceAt(ctx, s.idTag(tenant, id), id, 0) // see transition
		}
	} else {
		err = domain.ErrNotFound()
	}
	switch {
	case err == nil:
		return true, false, nil
	case errors.Is(err, errNothingToDo):
		return false, false, nil
	case domain.ErrorCode(err) == domain.NotFound:
		return false, true, nil
	}
	return false, false, err
}

// transitionArgs is what one operation asks of transition.lua (its ARGV).
type transitionArgs struct {
	// op names the operation in errors and in the Idempotency-Key's key and
	// fingerprint: processing, complete, fail, cancel, timeout.
	op string
	// to is the status the request moves to (processing again: a heartbeat).
	to domain.Status
	// payload is the JSON the step stores: the progress (processing), the
	// result (succeeded), the failure (failed, expired) or the cancel reason;
	// "" for none.
	payload string
	// resultType is the result's type (succeeded only).
	resultType string
	// guard is "" for callers. For the sweeper it is the status the request
	// must still be in, queued or processing, with its timeout passed: the
	// script then does nothing (codeNothingToDo) when it moved on meanwhile.
	guard domain.Status
}

// transition runs transition.lua in the shard the id names, then in shard 0
// (atIDShard).
func (s *Store) transition(ctx context.Context, p domain.TransitionParams, a transitionArgs) (*domain.Request, error) {
	if !validID(p.ID) {
		return nil, domain.ErrNotFound()
	}
	req, named, fromZero, err := atIDShard(s, p.Tenant, p.ID, func(tag string, first bool) (*domain.Request, error) {
		return s.transitionAt(ctx, tag, first, p, a)
	})
	if fromZero && err == nil {
		s.announceAt(ctx, named, p.ID, req.Version)
	}
	return req, err
}

// announceAt tells the waiters of id, who listen on the change channel of the
// tag its id names, of a change a script made (and announced) in shard 0: the
// rare older id that names a shard only by chance. Best effort, as the
// script's own announcement is.
func (s *Store) announceAt(ctx context.Context, tag, id string, version int64) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	_ = s.rdb.Do(ctx, publishCommand(s.rdb), s.k.changes(tag), id+","+strconv.FormatInt(version, 10)).Err()
}

// transitionAt is transition in the shard of hash tag tag.
//
// count asks it to count the write rate limits (the first try only: a second
// try in shard 0 is the same call).
func (s *Store) transitionAt(ctx context.Context, tag string, count bool, p domain.TransitionParams, a transitionArgs) (*domain.Request, error) {
	ca, _ := idMillis(p.ID)
	c := transitionCall{transitionArgs: a, on: on{tag: tag, id: p.ID, now: s.now().UnixMilli()}, createdAt: ca, by: p.By}
	if a.guard == "" && count { // the sweeper's timeouts are nobody's calls
		c.rate = s.counters(tag, ratelimit.ScopeWrite, p.Credential)
	}
	tk := s.tagKeys(tag)
	if p.IdemKey != "" {
		c.idem = tk.idempotency(hex.EncodeToString(idemDigest(a.op, p.ID, p.IdemKey)))
		c.fp = fingerprint(a.op, a.payload, a.resultType)
	}
	r, err := s.run(ctx, s.sc.transition, c.call(tk))
	if err != nil {
		return nil, backend(a.op+" request "+p.ID, err)
	}
	setRate(p.Rate, r)
	// outcome answers nil for these two: the op's name is spelled only for
	// the others.
	if r.code != codeOK && r.code != codeReplay {
		return nil, s.outcome(a.op+" request", p.ID, r)
	}
	if r.code == codeOK {
		s.outboxHook.written(shardName(tag))
		s.auditHook.written(shardName(tag))
	}
	req, err := decodeRecord(p.ID, r.str, false)
	if t := s.opts.Tracer; t != nil && err == nil && req.TraceContext != "" {
		t.LinkKept(ctx, req.TraceContext)
	}
	return req, err
}

// transitionCall is one call of transition.lua: an operation's
// transitionArgs, and where and by whom it runs.
type transitionCall struct {
	transitionArgs
	on
	// createdAt is the id's created_at (unix ms).
	createdAt int64
	by        string
	// idem is the Idempotency-Key's key and fp the call's fingerprint; "" without one.
	idem, fp string
}

// call is transition.lua's KEYS and ARGV, in its header's order.
// The keys are c.tag's, from t.
func (c transitionCall) call(t *tagKeys) scriptCall {
	sc := newCmdCall(12, 12)
	sc.cmd = append(sc.cmd, t.record(c.id), t.deadlines, t.retentionBuckets,
		t.pacing(c.id), t.meta, t.webhookFilter, t.outbox, t.audit, t.changes)
	c.rate.addTo(&sc)
	if c.idem != "" {
		sc.addKey(c.idem)
	}
	sc.endKeys()
	sc.cmd = append(sc.cmd, statusArg[c.to], c.now, c.by, c.payload, c.resultType, statusArg[c.guard],
		c.fp, c.id, c.createdAt, t.retentionBucketPrefix, t.indexPrefixArg, t.indexHeads)
	return sc
}

// Delete removes a request and everything that belongs to it; its audit
// entry names no actor (by ""). Callers that know who asked use DeleteBy.
func (s *Store) Delete(ctx context.Context, tenant, id string) error {
	return s.DeleteBy(ctx, tenant, id, "")
}

// DeleteBy removes a request and everything that belongs to it; by (a key id)
// is who asked, for the audit entry. It is not counted against rate limits.
func (s *Store) DeleteBy(ctx context.Context, tenant, id, by string) error {
	return s.Remove(ctx, domain.TransitionParams{Call: domain.Call{Tenant: tenant, By: by}, ID: id})
}

// Remove is DeleteBy for a caller of the API: p.By is who asked, p.Credential
// (when set) is counted against the admin rate limits in the same script, and
// p.Rate receives the counted limit. A refused call removes nothing.
func (s *Store) Remove(ctx context.Context, p domain.TransitionParams) error {
	if !validID(p.ID) {
		return domain.ErrNotFound()
	}
	_, named, fromZero, err := atIDShard(s, p.Tenant, p.ID, func(tag string, first bool) (struct{}, error) {
		return struct{}{}, s.deleteAt(ctx, tag, p, first)
	})
	if fromZero && err == nil {
		s.announceAt(ctx, named, p.ID, 0) // the hub reads the record again: gone
	}
	return err
}

// deleteAt is Remove in the shard of hash tag tag; count asks it to count the
// admin rate limits (the first try only: see transition).
func (s *Store) deleteAt(ctx context.Context, tag string, p domain.TransitionParams, count bool) error {
	a := deleteArgs{on: on{tag: tag, id: p.ID, now: s.now().UnixMilli()}, by: p.By}
	if count {
		a.rate = s.counters(tag, ratelimit.ScopeAdmin, p.Credential)
	}
	r, err := s.run(ctx, s.sc.remove, a.call(s.k))
	if err != nil {
		return backend("delete request "+p.ID, err)
	}
	setRate(p.Rate, r)
	if err := s.outcome("delete request", p.ID, r, codeOK); err != nil {
		return err
	}
	s.auditHook.written(shardName(tag))
	return nil
}

// deleteArgs is what a delete asks of delete.lua.
type deleteArgs struct {
	on
	// by is who asked (a key id, for the audit entry).
	by string
}

// call is delete.lua's KEYS and ARGV, in its header's order.
func (a deleteArgs) call(k keys) scriptCall {
	keys := make([]string, 6, 8)
	keys[0], keys[1], keys[2] = k.record(a.tag, a.id), k.deadlines(a.tag), k.pacing(a.tag, a.id)
	keys[3], keys[4], keys[5] = k.audit(a.tag), k.meta(a.tag), k.changes(a.tag)
	return scriptCall{keys: a.rate.appendTo(keys), args: []any{a.id, a.now, k.indexPrefix(a.tag), a.by, k.indexHeads(a.tag)}}
}
