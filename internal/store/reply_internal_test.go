package store

import (
	"strconv"
	"testing"
)

// polled is what Go reads of poll.lua's reply after its code digit: the rate
// part (decodeReply), then the number and the record (parsePollReply).
type polled struct {
	n      int      // how many numbers: 1, or 4 with a rate part
	nums   [4]int64 // n, then the rate's limit, remaining and reset (ms)
	rec    string
	hasRec bool
}

func readPolled(in string) (polled, bool) {
	r, err := decodeReply("0" + in)
	if err != nil {
		return polled{}, false
	}
	pr, ok := parsePollReply(r.str)
	if !ok {
		return polled{}, false
	}
	p := polled{n: 1, nums: [4]int64{pr.n}, rec: pr.rec, hasRec: pr.hasRec}
	if r.counted {
		p.n, p.nums[1], p.nums[2], p.nums[3] = 4, r.rate.Limit, r.rate.Remaining, r.rate.Reset.UnixMilli()
	}
	return p, true
}

// write is what poll.lua writes for p.
func (p polled) write() string {
	s := ""
	if p.n == 4 {
		s = ":" + strconv.FormatInt(p.nums[1], 10) + "," + strconv.FormatInt(p.nums[2], 10) + "," + strconv.FormatInt(p.nums[3], 10) + ";"
	}
	s += "," + strconv.FormatInt(p.nums[0], 10)
	if p.hasRec {
		s += "|" + p.rec
	}
	return s
}

// poll.lua's reply after its code digit, as the script writes it and as Go reads it.
func TestParsePollReply(t *testing.T) {
	rec := "p\x1f2\x1fstatement.export\x1f\x1fkey_b\x1f5\x1f\x1f\x1f\x1f{\"a\":\"x|y,z;:\"}\x1f\x1f\x1f\x1f"
	for _, tc := range []struct {
		in     string
		ok     bool
		n      int
		nums   [4]int64
		rec    string
		hasRec bool
	}{
		{in: ",2|" + rec, ok: true, n: 1, nums: [4]int64{2}, rec: rec, hasRec: true},
		{in: ":100,99,1764410401000;,0|" + rec, ok: true, n: 4, nums: [4]int64{0, 100, 99, 1764410401000}, rec: rec, hasRec: true},
		{in: ",0", ok: true, n: 1},
		{in: ":50,49,1764410401000;,7", ok: true, n: 4, nums: [4]int64{7, 50, 49, 1764410401000}},
		{in: ",0,-1", ok: false},       // two numbers
		{in: ",1,2,3,4,5", ok: false},  // five
		{in: ":1,2;,0", ok: false},     // a rate of two numbers
		{in: ":1,2,3,4;,0", ok: false}, // a rate of four
		{in: ":1,2,3,0", ok: false},    // a rate without its end
		{in: "0", ok: false},           // no leading comma
		{in: "", ok: false},            // nothing
		{in: ",x|" + rec, ok: false},   // not a number
		{in: ":1,,3;,4", ok: false},    // empty field
		{in: ",1,2,3,4,", ok: false},   // trailing comma
		{in: ":1,2,3;", ok: false},     // a rate and no number
		{in: "|" + rec, ok: false},     // no numbers
	} {
		pr, ok := readPolled(tc.in)
		if ok != tc.ok {
			t.Errorf("readPolled(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if pr.n != tc.n || pr.nums != tc.nums || pr.rec != tc.rec || pr.hasRec != tc.hasRec {
			t.Errorf("readPolled(%q) = %+v", tc.in, pr)
		}
	}
}

// FuzzPollReply: any input is either refused or read back to what poll.lua
// would have written for the same numbers and record; none panics.
func FuzzPollReply(f *testing.F) {
	f.Add(",2|p\x1f1")
	f.Add(":100,99,1764410401000;,0")
	f.Add(",1,2,3,4,5|")
	f.Fuzz(func(t *testing.T, in string) {
		pr, ok := readPolled(in)
		if !ok {
			return
		}
		// numbers may have been written "+1" or "01"; what is read must be what a
		// canonical writer would send for the same values
		again := pr.write()
		pr2, ok2 := readPolled(again)
		if !ok2 || pr2 != pr {
			t.Fatalf("readPolled(%q) = %+v; its canonical form %q reads %+v, %v", in, pr, again, pr2, ok2)
		}
	})
}

// decodeReply: a string reply's first byte is the code digit.
func TestDecodeStringReply(t *testing.T) {
	for _, tc := range []struct {
		in   any
		code int64
		str  string
		ok   bool
	}{
		{in: "0rec", code: 0, str: "rec", ok: true},
		{in: "7", code: 7, ok: true},
		{in: "", ok: false},
		{in: "x1", ok: false},
		{in: []any{int64(3), int64(4)}, code: 3, ok: true},
		{in: int64(1), ok: false},
	} {
		r, err := decodeReply(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("decodeReply(%#v) err = %v, want ok %v", tc.in, err, tc.ok)
			continue
		}
		if err == nil && (r.code != tc.code || r.str != tc.str) {
			t.Errorf("decodeReply(%#v) = %+v", tc.in, r)
		}
	}
}
