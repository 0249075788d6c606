// Package histories checks recorded histories of the service against the
// contract (docs/reference.md §3, §4, §11, §12).
//
// Its tests (histories_test.go and the files beside it) run real `serve`
// processes on real Redis topologies, drive them with concurrent clients while
// a nemesis injects faults, and record every operation with its invoke and
// return time and what it returned. This file holds what is checked:
//
//   - per request id, the history is linearizable (porcupine) against a model
//     of the lifecycle: versions increase by one per accepted transition, a
//     terminal status never changes, of racing terminal transitions exactly one
//     wins, and an acknowledged transition is seen by every later read;
//   - every long poll or stream that was open when an acknowledged transition
//     happened, and stayed open past its acknowledgement plus a bound, saw it
//     (no missed wake-up, §12);
//   - a list walk after quiescence holds every acknowledged, undeleted create
//     exactly once (§4 List).
//
// An operation whose outcome is unknown (a 503, a timeout, a connection cut)
// may or may not have taken effect: the model lets it do either, at any time
// after its invocation.
package histories

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation asked of the service.
type Kind string

// The operations of a history.
const (
	Create     Kind = "create"     // POST /v1/requests (with or without Idempotency-Key)
	Processing Kind = "processing" // POST .../processing (start or heartbeat)
	Complete   Kind = "complete"   // POST .../complete
	Fail       Kind = "fail"       // POST .../fail
	Cancel     Kind = "cancel"     // POST .../cancel
	Poll       Kind = "poll"       // GET /v1/requests/{id}
	LongPoll   Kind = "longpoll"   // GET /v1/requests/{id} with Prefer: wait and If-None-Match
	Event      Kind = "event"      // one event of GET .../stream: a read of the state
	Delete     Kind = "delete"     // DELETE /v1/requests/{id}
)

// Outcome is what an operation returned, as far as the model is concerned.
type Outcome string

// The outcomes.
const (
	OK          Outcome = "ok"           // 2xx: the write took effect / the read saw Status, Version
	NotModified Outcome = "not-modified" // 304 of a long poll: the version was still the If-None-Match one
	Terminal    Outcome = "terminal"     // 409 ALREADY_TERMINAL with the current Status, Version
	NotFound    Outcome = "not-found"    // 404
	Unknown     Outcome = "unknown"      // 503, timeout, connection cut: may or may not have taken effect
)

// Op is one recorded operation on one request.
type Op struct {
	Client  int // who made it (a worker, a waiter), for the visualisation
	Serve   int // which serve process answered (index)
	Kind    Kind
	ID      string
	Call    time.Time
	Return  time.Time // when the answer arrived; for Unknown, when the caller gave up
	Outcome Outcome
	Status  string // observed status (OK and Terminal outcomes)
	Version int    // observed version (OK and Terminal outcomes)
	ETag    int    // a long poll's If-None-Match version
	Stream  int    // for Event: the stream it belongs to (1-based)
	Keyed   bool   // a create with an Idempotency-Key
}

func (o Op) String() string {
	s := fmt.Sprintf("%s %s via serve %d [%s .. %s]: %s", o.Kind, o.ID, o.Serve,
		o.Call.Format("15:04:05.000"), o.Return.Format("15:04:05.000"), o.Outcome)
	if o.Outcome == OK || o.Outcome == Terminal {
		s += fmt.Sprintf(" %s v%d", o.Status, o.Version)
	}
	if o.Kind == LongPoll {
		s += fmt.Sprintf(" (If-None-Match v%d)", o.ETag)
	}
	return s
}

// terminalOf is the status a terminal transition sets.
var terminalOf = map[Kind]string{Complete: "succeeded", Fail: "failed", Cancel: "cancelled"}

// IsTerminal reports whether status is terminal (§3).
func IsTerminal(status string) bool {
	switch status {
	case "succeeded", "failed", "cancelled", "expired":
		return true
	}
	return false
}

func isWrite(k Kind) bool {
	switch k {
	case Create, Processing, Complete, Fail, Cancel, Delete:
		return true
	}
	return false
}

// state is the model's state of one request.
type state struct {
	Created bool
	Deleted bool
	Status  string
	Version int
}

func (s state) String() string {
	switch {
	case !s.Created:
		return "not created"
	case s.Deleted:
		return "deleted"
	}
	return fmt.Sprintf("%s v%d", s.Status, s.Version)
}

// apply is the state after op took effect, and whether op's answer (when it
// has one) is what the service must have answered in state s.
func apply(s state, op Op) (bool, state) {
	known := op.Outcome != Unknown
	gone := !s.Created || s.Deleted
	switch op.Kind {
	case Create:
		if s.Created {
			// An idempotent replay (or a replay after a delete): the original
			// answer, nothing changes.
			return !known || op.Outcome == OK, s
		}
		if known && (op.Outcome != OK || op.Status != "queued" || op.Version != 1) {
			return false, s
		}
		return true, state{Created: true, Status: "queued", Version: 1}
	case Processing, Complete, Fail, Cancel:
		if gone {
			return !known || op.Outcome == NotFound, s
		}
		if IsTerminal(s.Status) {
			return !known || (op.Outcome == Terminal && op.Status == s.Status && op.Version == s.Version), s
		}
		to := "processing"
		if op.Kind != Processing {
			to = terminalOf[op.Kind]
		}
		next := state{Created: true, Status: to, Version: s.Version + 1}
		return !known || (op.Outcome == OK && op.Status == to && op.Version == next.Version), next
	case Poll, LongPoll, Event:
		if gone {
			return op.Outcome == NotFound, s
		}
		if op.Outcome == NotModified {
			return op.ETag == s.Version, s
		}
		return op.Outcome == OK && op.Status == s.Status && op.Version == s.Version, s
	case Delete:
		if gone {
			return !known || op.Outcome == NotFound, s
		}
		return !known || op.Outcome == OK, state{Created: true, Deleted: true}
	}
	return false, s
}

// Model is the lifecycle of one request (partition the history by id first).
// An operation with an unknown outcome either took effect or did not.
var Model = porcupine.NondeterministicModel{
	Init: func() []any { return []any{state{}} },
	Step: func(st, in, _ any) []any {
		s, op := st.(state), in.(Op)
		ok, next := apply(s, op)
		if op.Outcome == Unknown {
			if next != s {
				return []any{s, next}
			}
			return []any{s}
		}
		if !ok {
			return nil
		}
		return []any{next}
	},
	DescribeOperation: func(in, _ any) string {
		op := in.(Op)
		d := fmt.Sprintf("%s → %s", op.Kind, op.Outcome)
		if op.Outcome == OK || op.Outcome == Terminal {
			d += fmt.Sprintf(" %s v%d", op.Status, op.Version)
		}
		if op.Kind == LongPoll {
			d += fmt.Sprintf(" (INM v%d)", op.ETag)
		}
		return d + fmt.Sprintf(" @serve%d", op.Serve)
	},
	DescribeState: func(st any) string { return st.(state).String() },
}

// never is the return time of an operation whose outcome is unknown: it may
// take effect at any point after its call.
const never = math.MaxInt64

// operations turns ops into porcupine operations; times are nanoseconds since
// origin. Unknown reads say nothing and are left out.
func operations(ops []Op, origin time.Time) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range ops {
		if op.Outcome == Unknown && !isWrite(op.Kind) {
			continue
		}
		ret := int64(op.Return.Sub(origin))
		if op.Outcome == Unknown {
			ret = never
		}
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: op, Output: op.Outcome,
			Call: int64(op.Call.Sub(origin)), Return: ret})
	}
	return out
}

// byID groups ops by request id, in call order.
func byID(ops []Op) map[string][]Op {
	m := map[string][]Op{}
	for _, op := range ops {
		if op.ID != "" {
			m[op.ID] = append(m[op.ID], op)
		}
	}
	for _, l := range m {
		sort.SliceStable(l, func(i, j int) bool { return l[i].Call.Before(l[j].Call) })
	}
	return m
}

// Linearizability is the verdict of the model check.
type Linearizability struct {
	Requests int      // request ids checked
	Illegal  []string // ids whose history is not linearizable
	TimedOut []string // ids the checker could not decide in time
}

// CheckLinearizable checks every request's history against [Model], each id
// on its own, within timeout per id. When some are not linearizable and
// visualize is not empty, the histories of those ids are written there with
// porcupine's visualisation (an HTML file).
func CheckLinearizable(ops []Op, timeout time.Duration, visualize string) (Linearizability, error) {
	var v Linearizability
	ids := byID(ops)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range ids {
			if !yield(k) {
				return
			}
		}
	})
	m := Model.ToModel()
	var origin time.Time
	for _, op := range ops {
		if origin.IsZero() || op.Call.Before(origin) {
			origin = op.Call
		}
	}
	var bad []porcupine.Operation
	for _, id := range keys {
		h := operations(ids[id], origin)
		if len(h) == 0 {
			continue
		}
		v.Requests++
		switch porcupine.CheckOperationsTimeout(m, h, timeout) {
		case porcupine.Illegal:
			v.Illegal = append(v.Illegal, id)
			bad = append(bad, h...)
		case porcupine.Unknown:
			v.TimedOut = append(v.TimedOut, id)
		}
	}
	if len(bad) > 0 && visualize != "" {
		m.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
			parts := map[string][]porcupine.Operation{}
			var order []string
			for _, o := range h {
				id := o.Input.(Op).ID
				if _, ok := parts[id]; !ok {
					order = append(order, id)
				}
				parts[id] = append(parts[id], o)
			}
			out := make([][]porcupine.Operation, 0, len(order))
			for _, id := range order {
				out = append(out, parts[id])
			}
			return out
		}
		_, info := porcupine.CheckOperationsVerbose(m, bad, timeout*time.Duration(max(1, len(v.Illegal))))
		if err := porcupine.VisualizePath(m, info, visualize); err != nil {
			return v, fmt.Errorf("writing the visualisation to %s: %w", visualize, err)
		}
	}
	return v, nil
}

// Anomaly is one violation of the contract, by kind.
type Anomaly struct {
	Kind   string // see the Anomaly* constants
	ID     string
	Detail string
}

func (a Anomaly) String() string { return a.Kind + " " + a.ID + ": " + a.Detail }

// The kinds of anomaly the checks name.
const (
	AnomalyLostWrite       = "lost-acknowledged-write" // a read after an acknowledged write saw an older state, or none
	AnomalyReadRegressed   = "read-regressed"          // a read saw an older state than an earlier read (a write seen, then lost)
	AnomalyTwoWinners      = "two-terminal-winners"    // two terminal transitions acknowledged on one request
	AnomalyTerminalChanged = "terminal-changed"        // two different terminal states observed
	AnomalyStreamOrder     = "stream-version-regressed"
	AnomalyMissedWakeup    = "missed-wakeup"     // a waiter held past an acknowledged change + bound
	AnomalyListMissing     = "list-missing"      // an acknowledged, undeleted create absent from a listing
	AnomalyListDuplicate   = "list-duplicate"    // one id twice in one walk
	AnomalyListDeleted     = "list-shows-delete" // an acknowledged delete still listed
	AnomalyNotLinearizable = "not-linearizable"  // the model check failed (the kinds above say why, where they can)
)

// Explain names the anomalies of each request's history by kind: the
// specific reasons a history is not linearizable that a person looks for
// first. It does not replace the model check, which catches more.
func Explain(ops []Op) []Anomaly {
	var out []Anomaly
	for id, l := range byID(ops) {
		var winners []Op
		terminals := map[string]Op{}
		var acked []Op // acknowledged writes
		streams := map[int]int{}
		for _, op := range l {
			if op.Outcome == OK && terminalOf[op.Kind] != "" {
				winners = append(winners, op)
			}
			if (op.Outcome == OK || op.Outcome == Terminal) && IsTerminal(op.Status) {
				terminals[op.Status] = op
			}
			if op.Outcome == OK && isWrite(op.Kind) && op.Kind != Delete {
				acked = append(acked, op)
			}
			if op.Kind == Event && op.Outcome == OK {
				if op.Version <= streams[op.Stream] {
					out = append(out, Anomaly{AnomalyStreamOrder, id, fmt.Sprintf("stream %d sent v%d after v%d", op.Stream, op.Version, streams[op.Stream])})
				}
				streams[op.Stream] = op.Version
			}
		}
		if len(winners) > 1 {
			out = append(out, Anomaly{AnomalyTwoWinners, id, fmt.Sprintf("%s and %s", winners[0], winners[1])})
		}
		if len(terminals) > 1 {
			var ss []string
			for _, op := range terminals {
				ss = append(ss, op.String())
			}
			sort.Strings(ss)
			out = append(out, Anomaly{AnomalyTerminalChanged, id, strings.Join(ss, "; ")})
		}
		var reads []Op
		for _, r := range l {
			if (r.Kind == Poll || r.Kind == LongPoll || r.Kind == Event) && r.Outcome == OK {
				reads = append(reads, r)
			}
		}
		for _, r2 := range reads {
			for _, r1 := range reads {
				if r1.Return.Before(r2.Call) && r2.Version < r1.Version {
					out = append(out, Anomaly{AnomalyReadRegressed, id, fmt.Sprintf("%s, after %s", r2, r1)})
					break
				}
			}
		}
		deleteCalled := time.Time{}
		for _, op := range l {
			if op.Kind == Delete && (deleteCalled.IsZero() || op.Call.Before(deleteCalled)) {
				deleteCalled = op.Call
			}
		}
		for _, r := range l {
			if r.Kind != Poll && r.Kind != LongPoll && r.Kind != Event {
				continue
			}
			if r.Outcome != OK && r.Outcome != NotFound {
				continue
			}
			for _, w := range acked {
				if !w.Return.Before(r.Call) {
					continue
				}
				if r.Outcome == NotFound && (deleteCalled.IsZero() || r.Return.Before(deleteCalled)) {
					out = append(out, Anomaly{AnomalyLostWrite, id, fmt.Sprintf("%s, after %s", r, w)})
					break
				}
				if r.Outcome == OK && r.Version < w.Version {
					out = append(out, Anomaly{AnomalyLostWrite, id, fmt.Sprintf("%s, after %s", r, w)})
					break
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind+out[i].ID < out[j].Kind+out[j].ID })
	return out
}

// Waiter is one long poll or stream, for the wake-up check.
type Waiter struct {
	Kind   Kind // LongPoll or Event (a stream)
	ID     string
	Serve  int
	Open   time.Time // call time
	Close  time.Time // when it ended (answer, end of stream, cut)
	ETag   int       // long poll: If-None-Match version; stream: the first event's version
	Seen   []Seen    // what it delivered (a long poll: its one answer, if 200)
	Ended  bool      // the long poll answered / the stream was closed by the server
	Broken bool      // cut by a fault (connection reset, serve killed): proves nothing
}

// Seen is a version delivered at a time.
type Seen struct {
	At      time.Time
	Version int
}

// Window is a time when a fault may delay wake-ups on a serve (-1: all).
type Window struct {
	Serve    int
	From, To time.Time // To includes the time to recover
	What     string
}

// WakeupReport is the verdict of the wake-up check.
type WakeupReport struct {
	Checked   int           // (waiter, acknowledged change) pairs that had to wake the waiter
	Excused   int           // pairs whose deadline a fault window moved (delivered in time after it)
	Late      []Anomaly     // missed wake-ups
	MaxDelay  time.Duration // the latest wake-up among the checked pairs
	Delays    []time.Duration
	BoundUsed time.Duration
}

// CheckWakeups checks that every waiter open across an acknowledged change of
// its request (a transition whose version is above the one the waiter held)
// delivered that change, or a later one, within bound of the later of the
// acknowledgement and the waiter's opening. A fault window of the waiter's
// serve (or of Redis, Serve -1) that overlaps the interval moves the deadline
// to the window's end plus bound: a waiter may be late during a fault, but it
// must not miss the change for good.
func CheckWakeups(ops []Op, waiters []Waiter, faults []Window, bound time.Duration) WakeupReport {
	rep := WakeupReport{BoundUsed: bound}
	acks := map[string][]Op{}
	for _, op := range ops {
		if op.Outcome == OK && isWrite(op.Kind) && op.Kind != Create && op.Kind != Delete {
			acks[op.ID] = append(acks[op.ID], op)
		}
	}
	// deadline is start+bound, moved past the end (+bound) of every fault
	// window of the serve (or of Redis) that overlaps the interval so far.
	deadline := func(serve int, start time.Time) (time.Time, bool) {
		due, moved := start.Add(bound), false
		for changed := true; changed; {
			changed = false
			for _, f := range faults {
				if (f.Serve == -1 || f.Serve == serve) && f.From.Before(due) && start.Before(f.To) && f.To.Add(bound).After(due) {
					due, moved, changed = f.To.Add(bound), true, true
				}
			}
		}
		return due, moved
	}
	for _, w := range waiters {
		if w.Broken {
			continue
		}
		for _, a := range acks[w.ID] {
			if a.Version <= w.ETag {
				continue
			}
			start := a.Return
			if w.Open.After(start) {
				start = w.Open
			}
			due, moved := deadline(w.Serve, start)
			// When was it delivered (a version at least a's)?
			var got time.Time
			for _, s := range w.Seen {
				if s.Version >= a.Version {
					got = s.At
					break
				}
			}
			switch {
			case !got.IsZero() && !got.After(due):
				if moved {
					rep.Excused++
					break
				}
				rep.Checked++
				d := got.Sub(start)
				rep.Delays = append(rep.Delays, d)
				rep.MaxDelay = max(rep.MaxDelay, d)
			case got.IsZero() && !w.Close.After(due):
				// It ended before it was due (an earlier change, its own timer,
				// the test's cut-off): nothing to check.
			default:
				rep.Checked++
				what := "never delivered it"
				if !got.IsZero() {
					what = fmt.Sprintf("delivered it %s after", got.Sub(start).Round(time.Millisecond))
				}
				rep.Late = append(rep.Late, Anomaly{AnomalyMissedWakeup, w.ID, fmt.Sprintf(
					"%s on serve %d open %s..%s holding v%d: %s v%d acknowledged at %s, it %s (bound %s)",
					w.Kind, w.Serve, w.Open.Format("15:04:05.000"), w.Close.Format("15:04:05.000"), w.ETag,
					a.Kind, a.Version, a.Return.Format("15:04:05.000"), what, bound)})
			}
		}
	}
	return rep
}

// CheckListing checks one complete list walk made after quiescence: every id
// whose create was acknowledged and that no delete was sent for appears
// exactly once; no id whose delete was acknowledged appears.
func CheckListing(ops []Op, listed []string) []Anomaly {
	var out []Anomaly
	count := map[string]int{}
	for _, id := range listed {
		count[id]++
	}
	for id, n := range count {
		if n > 1 {
			out = append(out, Anomaly{AnomalyListDuplicate, id, fmt.Sprintf("listed %d times", n)})
		}
	}
	for id, l := range byID(ops) {
		created, deleteSent, deleted := false, false, false
		for _, op := range l {
			switch {
			case op.Kind == Create && op.Outcome == OK:
				created = true
			case op.Kind == Delete:
				deleteSent = true
				deleted = deleted || op.Outcome == OK
			}
		}
		switch {
		case created && !deleteSent && count[id] == 0:
			out = append(out, Anomaly{AnomalyListMissing, id, "acknowledged create, never deleted, not listed"})
		case deleted && count[id] > 0:
			out = append(out, Anomaly{AnomalyListDeleted, id, "acknowledged delete, still listed"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind+out[i].ID < out[j].Kind+out[j].ID })
	return out
}
