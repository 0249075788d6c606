package store_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/store"
)

// auditFixture is a fixture whose store records audit entries, at most bound per tenant.
func auditFixture(tb testing.TB, b backend, bound int, mod func(*store.Options)) *fixture {
	return newFixture(tb, b, func(o *store.Options) {
		o.AuditBacklog = bound
		if mod != nil {
			mod(o)
		}
	})
}

// readAllAudit drains every audit entry of tenant as consumer would: read a
// batch, acknowledge it (as once the sink wrote it), until nothing is left.
func (f *fixture) readAllAudit(tb testing.TB, consumer, tenant string) []domain.AuditEvent {
	tb.Helper()
	var out []domain.AuditEvent
	for {
		evs, err := f.s.ReadAudit(ctx, consumer, f.auditNames(tenant), 100, time.Minute)
		if err != nil {
			tb.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		if err := f.s.AckAudit(ctx, evs); err != nil {
			tb.Fatal(err)
		}
		out = append(out, evs...)
	}
}

// auditNames are the names the drainer knows tenant's shards by (AuditTenants):
// the tenant for shard 0, "<tenant>:<n>" for the others.
func (f *fixture) auditNames(tenant string) []domain.ShardName {
	var out []domain.ShardName
	for _, tag := range store.TenantTags(f.s, tenant) {
		out = append(out, domain.ShardName(strings.Trim(tag, "{}")))
	}
	return out
}

// auditLen is how many entries wait in all of tenant's audit streams.
func (f *fixture) auditLen(tb testing.TB, tenant string) int64 {
	tb.Helper()
	var n int64
	for _, tag := range store.TenantTags(f.s, tenant) {
		n += f.rdb.XLen(ctx, f.prefix+":"+tag+":au").Val()
	}
	return n
}

// auditSummary writes an event as "<version> <type> <seq> <from>><to> <by> <failure code>".
func auditSummary(e domain.AuditEvent) string {
	st := func(s *domain.Status) string {
		if s == nil {
			return "-"
		}
		return string(*s)
	}
	return fmt.Sprintf("%d %s %d %s>%s %s %s", e.Version, e.Type, e.Seq, st(e.From), st(e.To), e.By, e.FailureCode)
}

// byRequest groups summaries by request id, in stream order.
func byRequest(evs []domain.AuditEvent) map[string][]string {
	out := map[string][]string{}
	for _, e := range evs {
		out[e.RequestID] = append(out[e.RequestID], auditSummary(e))
	}
	return out
}

// secretWords are in every context, result, progress message and reason the
// audit tests write: no audit entry may contain one.
const secretWord = "s3cr3t"

// TestAuditEntriesForEveryChange: create, start, heartbeats, each terminal
// status by a caller and by the sweeper, and delete each record one entry in
// the step that made the change, with versions without gaps, the /events seq,
// and nothing of the request's payloads; refused calls and replays record none.
func TestAuditEntriesForEveryChange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := auditFixture(t, b, 1000, func(o *store.Options) {
			o.QueuedTimeout = time.Minute
			o.ProcessingTimeout = 10 * time.Second
		})
		create := func() string {
			r, _, err := f.s.Create(ctx, domain.CreateParams{
				Call:  domain.Call{Tenant: "acme", By: "key_c"},
				Input: domain.CreateInput{Type: "t.a", Context: json.RawMessage(`{"k":"` + secretWord + `"}`)},
			})
			if err != nil {
				t.Fatal(err)
			}
			return r.ID
		}
		progress := domain.ProgressInput{Progress: json.RawMessage(`{"percent":10,"message":"` + secretWord + `"}`)}
		must := func(_ *domain.Request, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}

		done := create()
		must(f.s.MarkProcessing(ctx, tp("acme", done), progress))
		must(f.s.MarkProcessing(ctx, tp("acme", done), progress))
		must(f.s.MarkProcessing(ctx, tp("acme", done), domain.ProgressInput{}))
		p := tp("acme", done)
		p.IdemKey = "k"
		res := domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"x":"` + secretWord + `"}`)}
		must(f.s.Complete(ctx, p, res))
		must(f.s.Complete(ctx, p, res)) // a replay: no entry
		_, err := f.s.Cancel(ctx, tp("acme", done), domain.CancelInput{})
		wantCode(t, err, domain.AlreadyTerminal) // refused: no entry
		if err := f.s.DeleteBy(ctx, "acme", done, "key_admin"); err != nil {
			t.Fatal(err)
		}

		failed := create()
		must(f.s.Fail(ctx, tp("acme", failed), domain.FailInput{Failure: domain.FailureJSON("ERR_LEDGER", secretWord)}))
		cancelled := create()
		must(f.s.Cancel(ctx, tp("acme", cancelled), domain.CancelInput{Reason: secretWord}))
		expired := create()
		timedOut := create()
		must(f.s.MarkProcessing(ctx, tp("acme", timedOut), progress))
		// An id's created_at is the wall clock's (the test clock started at the
		// fixture's): past the queued timeout of expired by the wall time
		// spent since, however slow the machine.
		f.clock.Add(time.Minute + time.Second + max(time.Since(f.clock.Now()), 0))
		if ok, err := f.s.ExpireQueued(ctx, "acme", expired); !ok || err != nil {
			t.Fatalf("expire: %v %v", ok, err)
		}
		if ok, err := f.s.TimeOutProcessing(ctx, "acme", timedOut); !ok || err != nil {
			t.Fatalf("time out: %v %v", ok, err)
		}

		evs := f.readAllAudit(t, "c1", "acme")
		want := map[string][]string{
			done: {"1 request.created 1 ->queued key_c ", "2 request.processing 2 queued>processing key_w ",
				"3 request.heartbeat 2 processing>processing key_w ", "4 request.heartbeat 2 processing>processing key_w ",
				"5 request.succeeded 3 processing>succeeded key_w ", "6 request.deleted 4 succeeded>- key_admin "},
			failed:    {"1 request.created 1 ->queued key_c ", "2 request.failed 2 queued>failed key_w ERR_LEDGER"},
			cancelled: {"1 request.created 1 ->queued key_c ", "2 request.cancelled 2 queued>cancelled key_w "},
			expired:   {"1 request.created 1 ->queued key_c ", "2 request.expired 2 queued>expired system REQUEST_EXPIRED"},
			timedOut: {"1 request.created 1 ->queued key_c ", "2 request.processing 2 queued>processing key_w ",
				"3 request.failed 3 processing>failed system ERR_JOB_EXECUTION_TIMED_OUT"},
		}
		got := byRequest(evs)
		for id, w := range want {
			if strings.Join(got[id], "\n") != strings.Join(w, "\n") {
				t.Errorf("request %s:\n got %q\nwant %q", id, got[id], w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("entries of %d requests, want %d", len(got), len(want))
		}
		ids := map[string]bool{}
		for _, e := range evs {
			if e.Tenant != "acme" || e.RequestType != "t.a" || e.EventID != fmt.Sprintf("evt_%s_%d", e.RequestID, e.Version) || ids[e.EventID] {
				t.Errorf("event %+v", e)
			}
			ids[e.EventID] = true
			if e.Type != domain.AuditDeleted && e.Type != domain.AuditHeartbeat && e.Seq == 1 && !e.At.Equal(uuidMillis(t, e.RequestID)) {
				t.Errorf("created at %v, the id says %v", e.At, uuidMillis(t, e.RequestID))
			}
		}
		// Nothing of the payloads is in Redis's copy either.
		for _, x := range f.rdb.XRange(ctx, f.prefix+":{acme}:au", "-", "+").Val() {
			if s := fmt.Sprint(x.Values); strings.Contains(s, secretWord) {
				t.Fatalf("audit entry holds a payload: %s", s)
			}
		}
	})
}

func uuidMillis(tb testing.TB, id string) time.Time {
	tb.Helper()
	var msec int64
	hex := strings.ReplaceAll(id, "-", "")[:12]
	if _, err := fmt.Sscanf(hex, "%x", &msec); err != nil {
		tb.Fatal(err)
	}
	return time.UnixMilli(msec).UTC()
}

// TestAuditOff: without an audit backlog (audit.sink none) no script writes an
// audit stream.
func TestAuditOff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		r := f.mustCreate(t, "acme", "t.a")
		if _, err := f.s.Cancel(ctx, tp("acme", r.ID), domain.CancelInput{}); err != nil {
			t.Fatal(err)
		}
		if err := f.s.DeleteBy(ctx, "acme", r.ID, "key_a"); err != nil {
			t.Fatal(err)
		}
		if n := f.auditLen(t, "acme"); n != 0 {
			t.Fatal("an audit stream was written with audit off")
		}
	})
}

// TestAuditBound: a tenant's stream holds at most the bound; the events past it
// are counted, not recorded, and transitions are still applied.
func TestAuditBound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := auditFixture(t, b, 3, nil)
		r := f.mustCreate(t, "acme", "t.a")
		for i := 0; i < 3; i++ {
			if _, err := f.s.MarkProcessing(ctx, tp("acme", r.ID), domain.ProgressInput{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.s.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if got := f.mustGet(t, "acme", r.ID); got.Status != domain.StatusSucceeded || got.Version != 5 {
			t.Fatalf("record %+v", got)
		}
		// the request's shard, by the name the drainer knows it by
		sh := domain.ShardName(strings.Trim(store.IDTag(f.s, "acme", r.ID), "{}"))
		bl, err := f.s.AuditBacklog(ctx, []domain.ShardName{sh, "other"})
		if err != nil {
			t.Fatal(err)
		}
		if len(bl) != 2 || bl[0] != (domain.AuditBacklog{Tenant: sh, Waiting: 3, Dropped: 2}) || bl[1] != (domain.AuditBacklog{Tenant: "other"}) {
			t.Fatalf("backlog %+v", bl)
		}
		// Once the sink took the backlog, events are recorded again.
		evs := f.readAllAudit(t, "c1", "acme")
		if err := f.s.AckAudit(ctx, evs); err != nil {
			t.Fatal(err)
		}
		if err := f.s.ForgetAuditDropped(ctx, sh, 2); err != nil {
			t.Fatal(err)
		}
		if err := f.s.DeleteBy(ctx, "acme", r.ID, "key_a"); err != nil {
			t.Fatal(err)
		}
		bl, err = f.s.AuditBacklog(ctx, []domain.ShardName{sh})
		if err != nil || bl[0] != (domain.AuditBacklog{Tenant: sh, Waiting: 1}) {
			t.Fatalf("backlog after the drain %+v %v", bl, err)
		}
	})
}

// TestAuditLease: one drainer at a time reads a stream, from its start; what
// it acknowledged leaves the stream and lets the stream go; what it read and
// never acknowledged (it died) stays first in the stream and is handed out
// again, to another drainer once the lease ended, so that no entry is lost.
func TestAuditLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := auditFixture(t, b, 1000, nil)
		for i := 0; i < 10; i++ {
			f.mustCreate(t, "acme", "t.a")
		}
		// up to 4 of each shard's stream (all 4 with one shard)
		names := f.auditNames("acme")
		want := int64(0)
		for _, tag := range store.TenantTags(f.s, "acme") {
			want += min(4, f.rdb.XLen(ctx, f.prefix+":"+tag+":au").Val())
		}
		one, err := f.s.ReadAudit(ctx, "c1", names, 4, time.Minute)
		if err != nil || int64(len(one)) != want || (f.shards == 1 && len(one) != 4) {
			t.Fatalf("c1 read %d, want %d: %v", len(one), want, err)
		}
		// c1 holds every stream it read: c2 gets nothing of them.
		if got, err := f.s.ReadAudit(ctx, "c2", names, 100, time.Minute); err != nil || len(got) != 0 {
			t.Fatalf("c2 read %d entries of streams c1 holds: %v", len(got), err)
		}
		if err := f.s.AckAudit(ctx, one); err != nil {
			t.Fatal(err)
		}
		if n := f.auditLen(t, "acme"); n != 10-int64(len(one)) {
			t.Fatalf("%d entries left, want %d", n, 10-len(one))
		}
		// The streams are free again: c2 reads on where c1 stopped.
		two, err := f.s.ReadAudit(ctx, "c2", names, 100, time.Minute)
		if err != nil || len(two)+len(one) != 10 {
			t.Fatalf("c2 read %d after c1's %d: %v", len(two), len(one), err)
		}
		seen := map[string]bool{}
		for _, e := range append(append([]domain.AuditEvent(nil), one...), two...) {
			if seen[e.EventID] {
				t.Fatalf("%s handed out twice", e.EventID)
			}
			seen[e.EventID] = true
		}
		// c2 "dies" before acknowledging: while its lease lasts nobody reads;
		// once it ended (on the store's clock), c3 reads the very entries c2 had.
		if got, err := f.s.ReadAudit(ctx, "c3", names, 100, time.Minute); err != nil || len(got) != 0 {
			t.Fatalf("c3 read %d entries during c2's lease: %v", len(got), err)
		}
		f.clock.Add(2 * time.Minute)
		got, err := f.s.ReadAudit(ctx, "c3", names, 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// c2 comes back: the streams are c3's now.
		if late, err := f.s.ReadAudit(ctx, "c2", names, 100, time.Minute); err != nil || len(late) != 0 {
			t.Fatalf("c2 read %d entries of streams c3 took over: %v", len(late), err)
		}
		ids := func(evs []domain.AuditEvent) string {
			var s []string
			for _, e := range evs {
				s = append(s, e.EventID)
			}
			sort.Strings(s)
			return strings.Join(s, ",")
		}
		if ids(got) != ids(two) {
			t.Fatalf("c3 read %s, want c2's %s", ids(got), ids(two))
		}
		if err := f.s.AckAudit(ctx, got); err != nil {
			t.Fatal(err)
		}
		if n := f.auditLen(t, "acme"); n != 0 {
			t.Fatalf("%d entries left", n)
		}
		// Entries written after a read are not trimmed by its acknowledgement.
		f.mustCreate(t, "acme", "t.a")
		if n := f.auditLen(t, "acme"); n != 1 {
			t.Fatalf("%d entries wait, want 1", n)
		}
	})
}

// TestUndecodableStreamEntriesDropped: an outbox or audit entry that does not
// decode (written by hand, or by a later version) is not handed out, and is
// acknowledged and deleted, so that no reader meets it again.
func TestUndecodableStreamEntriesDropped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		outbox, audit := f.prefix+":{acme}:ob", f.prefix+":{acme}:au"
		for _, key := range []string{outbox, audit} {
			if err := f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []string{"junk", "1"}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if msgs, err := f.s.ReadOutbox(ctx, "c1", map[domain.ShardName]int{"acme": 10}); err != nil || len(msgs) != 0 {
			t.Fatalf("outbox: %+v %v", msgs, err)
		}
		if evs, err := f.s.ReadAudit(ctx, "c1", []domain.ShardName{"acme"}, 10, time.Minute); err != nil || len(evs) != 0 {
			t.Fatalf("audit: %+v %v", evs, err)
		}
		for _, key := range []string{outbox, audit} {
			if n := f.rdb.XLen(ctx, key).Val(); n != 0 {
				t.Errorf("%s still holds %d entries", key, n)
			}
		}
	})
}
