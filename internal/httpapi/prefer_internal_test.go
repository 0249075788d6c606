package httpapi

import (
	"testing"
	"time"
)

func TestPreferWait(t *testing.T) {
	for _, c := range []struct {
		headers []string
		n       int
		ok      bool
	}{
		{[]string{"wait=10"}, 10, true},
		{[]string{"respond-async, wait=5"}, 5, true},
		{[]string{"WAIT = \"7\" ; x=y"}, 7, true},
		{[]string{"return=minimal", "wait=3"}, 3, true},
		{[]string{"wait=0"}, 0, true}, // applied as 1 (appliedWait)
		{[]string{"wait=-1"}, 0, false},
		{[]string{"wait=1.5"}, 0, false},
		{[]string{"wait="}, 0, false},
		{[]string{"wait=9999999999"}, 0, false},
		{[]string{"waiting=3"}, 0, false},
		{[]string{"respond-async"}, 0, false},
		{nil, 0, false},
	} {
		var hs [][]byte
		for _, h := range c.headers {
			hs = append(hs, []byte(h))
		}
		if n, ok := preferWait(hs); n != c.n || ok != c.ok {
			t.Errorf("%q: %d %v, want %d %v", c.headers, n, ok, c.n, c.ok)
		}
	}
	s := &Server{opts: Options{Wait: WaitOptions{Max: 25 * time.Second}}}
	for in, want := range map[int]int{0: 1, 1: 1, 25: 25, 26: 25, 999999999: 25} {
		if got := s.appliedWait(in); got != want {
			t.Errorf("appliedWait(%d) = %d, want %d", in, got, want)
		}
	}
}
