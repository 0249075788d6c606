package histories

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The checks on hand-made histories: each must pass a history that keeps the
// contract and fail one that breaks it, so that a clean verdict of the
// history tests means something.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func op(kind Kind, call, ret int, out Outcome, status string, version int) Op {
	return Op{Kind: kind, ID: "r1", Call: at(call), Return: at(ret), Outcome: out, Status: status, Version: version}
}

func TestModel(t *testing.T) {
	created := op(Create, 0, 1, OK, "queued", 1)
	for _, tc := range []struct {
		name string
		ops  []Op
		ok   bool
	}{
		{"lifecycle", []Op{created, op(Processing, 2, 3, OK, "processing", 2), op(Complete, 4, 5, OK, "succeeded", 3),
			op(Poll, 6, 7, OK, "succeeded", 3)}, true},
		{"racing terminals, one wins", []Op{created, op(Complete, 2, 5, OK, "succeeded", 2),
			op(Fail, 2, 5, Terminal, "succeeded", 2), op(Cancel, 3, 4, Terminal, "succeeded", 2)}, true},
		{"two winners", []Op{created, op(Complete, 2, 5, OK, "succeeded", 2), op(Fail, 2, 5, OK, "failed", 2)}, false},
		{"terminal changed", []Op{created, op(Complete, 2, 3, OK, "succeeded", 2), op(Poll, 4, 5, OK, "failed", 2)}, false},
		{"acknowledged write lost", []Op{created, op(Processing, 2, 3, OK, "processing", 2), op(Poll, 4, 5, OK, "queued", 1)}, false},
		{"acknowledged create lost", []Op{created, op(Poll, 4, 5, NotFound, "", 0)}, false},
		{"version jumps by two", []Op{created, op(Processing, 2, 3, Unknown, "", 0), op(Poll, 4, 5, OK, "processing", 3)}, false},
		{"unknown write applied", []Op{created, op(Processing, 2, 3, Unknown, "", 0), op(Poll, 4, 5, OK, "processing", 2)}, true},
		{"unknown write not applied", []Op{created, op(Processing, 2, 3, Unknown, "", 0), op(Poll, 4, 5, OK, "queued", 1)}, true},
		{"unknown write applied late", []Op{created, op(Processing, 2, 3, Unknown, "", 0), op(Poll, 4, 5, OK, "queued", 1),
			op(Poll, 6, 7, OK, "processing", 2)}, true},
		{"seen then lost", []Op{created, op(Processing, 2, 3, Unknown, "", 0), op(Poll, 4, 5, OK, "processing", 2),
			op(Poll, 6, 7, OK, "queued", 1)}, false},
		{"delete", []Op{created, op(Delete, 2, 3, OK, "", 0), op(Poll, 4, 5, NotFound, "", 0),
			op(Complete, 6, 7, NotFound, "", 0)}, true},
		{"deleted then seen", []Op{created, op(Delete, 2, 3, OK, "", 0), op(Poll, 4, 5, OK, "queued", 1)}, false},
		{"long poll 304 on a stale version", []Op{created, op(Processing, 2, 3, OK, "processing", 2),
			{Kind: LongPoll, ID: "r1", Call: at(4), Return: at(5), Outcome: NotModified, ETag: 1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "h.html")
			v, err := CheckLinearizable(tc.ops, 5*time.Second, file)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(v.Illegal) == 0; got != tc.ok {
				t.Fatalf("linearizable = %v, want %v", got, tc.ok)
			}
			_, statErr := os.Stat(file)
			if tc.ok != os.IsNotExist(statErr) {
				t.Errorf("visualisation written = %v for a history that is linearizable = %v", statErr == nil, tc.ok)
			}
			if !tc.ok {
				b, _ := os.ReadFile(file)
				if !strings.Contains(string(b), "r1") && !strings.Contains(string(b), "processing") && !strings.Contains(string(b), "queued") {
					t.Errorf("the visualisation does not describe the operations")
				}
			}
		})
	}
}

func TestExplain(t *testing.T) {
	created := op(Create, 0, 1, OK, "queued", 1)
	kinds := func(ops []Op) map[string]int {
		m := map[string]int{}
		for _, a := range Explain(ops) {
			m[a.Kind]++
		}
		return m
	}
	if k := kinds([]Op{created, op(Complete, 2, 5, OK, "succeeded", 2), op(Fail, 2, 5, OK, "failed", 2)}); k[AnomalyTwoWinners] != 1 || k[AnomalyTerminalChanged] != 1 {
		t.Errorf("two winners: %v", k)
	}
	if k := kinds([]Op{created, op(Processing, 2, 3, OK, "processing", 2), op(Poll, 4, 5, OK, "queued", 1)}); k[AnomalyLostWrite] != 1 {
		t.Errorf("lost write: %v", k)
	}
	if k := kinds([]Op{created, op(Delete, 2, 3, OK, "", 0), op(Poll, 4, 5, NotFound, "", 0)}); len(k) != 0 {
		t.Errorf("a delete is no lost write: %v", k)
	}
	if k := kinds([]Op{created, op(Poll, 2, 3, OK, "processing", 2), op(Poll, 4, 5, OK, "queued", 1)}); k[AnomalyReadRegressed] != 1 {
		t.Errorf("read regressed: %v", k)
	}
	ev := func(stream, ret, version int) Op {
		return Op{Kind: Event, ID: "r1", Call: at(1), Return: at(ret), Outcome: OK, Status: "processing", Version: version, Stream: stream}
	}
	if k := kinds([]Op{created, ev(1, 2, 2), ev(1, 3, 2)}); k[AnomalyStreamOrder] != 1 {
		t.Errorf("stream order: %v", k)
	}
}

func TestCheckWakeups(t *testing.T) {
	ack := op(Complete, 100, 200, OK, "succeeded", 2)
	bound := time.Second
	waiter := func(close, seenAt int) Waiter {
		w := Waiter{Kind: LongPoll, ID: "r1", Serve: 1, Open: at(0), Close: at(close), ETag: 1, Ended: true}
		if seenAt >= 0 {
			w.Seen = []Seen{{At: at(seenAt), Version: 2}}
		}
		return w
	}
	for _, tc := range []struct {
		name   string
		w      Waiter
		faults []Window
		late   int
	}{
		{"woken in time", waiter(250, 250), nil, 0},
		{"woken late", waiter(1500, 1500), nil, 1},
		{"never woken", waiter(5000, -1), nil, 1},
		{"ended before it was due", waiter(600, -1), nil, 0},
		{"late during a fault of its serve", waiter(2500, 2500), []Window{{Serve: 1, From: at(150), To: at(2000)}}, 0},
		{"late past the fault", waiter(4000, 4000), []Window{{Serve: 1, From: at(150), To: at(2000)}}, 1},
		{"a fault of another serve excuses nothing", waiter(2500, 2500), []Window{{Serve: 0, From: at(150), To: at(2000)}}, 1},
		{"a Redis fault moves every deadline", waiter(2500, 2500), []Window{{Serve: -1, From: at(150), To: at(2000)}}, 0},
		{"broken", Waiter{Kind: LongPoll, ID: "r1", Open: at(0), Close: at(5000), ETag: 1, Broken: true}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := CheckWakeups([]Op{ack}, []Waiter{tc.w}, tc.faults, bound)
			if len(rep.Late) != tc.late {
				t.Errorf("%d late, want %d: %v", len(rep.Late), tc.late, rep.Late)
			}
		})
	}
}

func TestCheckListing(t *testing.T) {
	ops := []Op{
		{Kind: Create, ID: "a", Outcome: OK},
		{Kind: Create, ID: "b", Outcome: OK},
		{Kind: Create, ID: "c", Outcome: OK}, {Kind: Delete, ID: "c", Outcome: OK},
		{Kind: Create, ID: "d", Outcome: OK}, {Kind: Delete, ID: "d", Outcome: Unknown},
	}
	kinds := func(listed ...string) map[string]int {
		m := map[string]int{}
		for _, a := range CheckListing(ops, listed) {
			m[a.Kind]++
		}
		return m
	}
	if k := kinds("a", "b"); len(k) != 0 {
		t.Errorf("a complete listing: %v", k)
	}
	if k := kinds("a", "b", "d", "x"); len(k) != 0 {
		t.Errorf("a maybe-deleted and an unknown create may be listed: %v", k)
	}
	if k := kinds("a"); k[AnomalyListMissing] != 1 {
		t.Errorf("b missing: %v", k)
	}
	if k := kinds("a", "b", "a"); k[AnomalyListDuplicate] != 1 {
		t.Errorf("a twice: %v", k)
	}
	if k := kinds("a", "b", "c"); k[AnomalyListDeleted] != 1 {
		t.Errorf("c deleted but listed: %v", k)
	}
}
