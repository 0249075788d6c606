package store

import (
	"strconv"
	"strings"
	"testing"
)

// poll.lua's reply after its code digit, as the script writes it and as Go reads it.
func TestParsePollReply(t *testing.T) {
	rec := "p\x1f2\x1fstatement.export\x1f\x1fkey_b\x1f5\x1f\x1f\x1f\x1f{\"a\":\"x|y,z\"}\x1f\x1f\x1f\x1f"
	for _, tc := range []struct {
		in     string
		ok     bool
		n      int
		nums   [4]int64
		rec    string
		hasRec bool
	}{
		{in: ",2|" + rec, ok: true, n: 1, nums: [4]int64{2}, rec: rec, hasRec: true},
		{in: ",0,100,99,1764410401000|" + rec, ok: true, n: 4, nums: [4]int64{0, 100, 99, 1764410401000}, rec: rec, hasRec: true},
		{in: ",0", ok: true, n: 1},
		{in: ",7,50,49,1764410401000", ok: true, n: 4, nums: [4]int64{7, 50, 49, 1764410401000}},
		{in: ",0,-1", ok: false},      // two numbers: neither form
		{in: ",1,2,3,4,5", ok: false}, // five
		{in: "0", ok: false},          // no leading comma
		{in: "", ok: false},           // nothing
		{in: ",x|" + rec, ok: false},  // not a number
		{in: ",1,,3,4", ok: false},    // empty field
		{in: ",1,2,3,4,", ok: false},  // trailing comma
		{in: "|" + rec, ok: false},    // no numbers
	} {
		pr, ok := parsePollReply(tc.in)
		if ok != tc.ok {
			t.Errorf("parsePollReply(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if pr.n != tc.n || pr.nums != tc.nums || pr.rec != tc.rec || pr.hasRec != tc.hasRec {
			t.Errorf("parsePollReply(%q) = %+v", tc.in, pr)
		}
	}
}

// FuzzPollReply: any input is either refused or read back to what poll.lua
// would have written for the same numbers and record; none panics.
func FuzzPollReply(f *testing.F) {
	f.Add(",2|p\x1f1")
	f.Add(",0,100,99,1764410401000")
	f.Add(",1,2,3,4,5|")
	f.Fuzz(func(t *testing.T, in string) {
		pr, ok := parsePollReply(in)
		if !ok {
			return
		}
		parts := make([]string, pr.n)
		for i := range pr.n {
			parts[i] = strconv.FormatInt(pr.nums[i], 10)
		}
		again := "," + strings.Join(parts, ",")
		if pr.hasRec {
			again += "|" + pr.rec
		}
		// numbers may have been written "+1" or "01"; what is read must be what a
		// canonical writer would send for the same values
		pr2, ok2 := parsePollReply(again)
		if !ok2 || pr2 != pr {
			t.Fatalf("parsePollReply(%q) = %+v; its canonical form %q reads %+v, %v", in, pr, again, pr2, ok2)
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
