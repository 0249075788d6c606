package client

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestSSEReader checks the parser against the rules of the WHATWG standard
// (HTML §9.2.6), including input cut at every byte.
func TestSSEReader(t *testing.T) {
	const stream = "\uFEFFretry: 1500\r\n: a comment\r\n\r\n" +
		"id: 1\nevent: request\ndata: {\"a\":1}\n\n" +
		"data:first\rdata: second\r\r" + // CR endings, no space after the colon, two data lines
		"id\nevent: other\ndata\n\n" + // a field without a colon: id reset to empty, empty data
		"id: 7\x00x\nretry: 12x\ndata: keeps id\n\n" + // an id with NUL and a bad retry are ignored
		"event: lost\n\n" + // no data: no event, and the type does not carry over
		"data:  two spaces\n\n" +
		"data: unfinished" // no blank line: dropped at the end
	want := []sseEvent{
		{ID: "1", Event: "request", Data: `{"a":1}`},
		{ID: "1", Event: "", Data: "first\nsecond"},
		{ID: "", Event: "other", Data: ""},
		{ID: "", Event: "", Data: "keeps id"},
		{ID: "", Event: "", Data: " two spaces"},
	}
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(stream),
		"bytewise": iotest.OneByteReader(strings.NewReader(stream)),
	} {
		t.Run(name, func(t *testing.T) {
			sr := newSSEReader(r)
			for i, w := range want {
				got, err := sr.Next()
				if err != nil || got != w {
					t.Fatalf("event %d: %+v %v, want %+v", i, got, err, w)
				}
			}
			if _, err := sr.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last event: %v", err)
			}
			if sr.retry != 1500*time.Millisecond {
				t.Fatalf("retry %v", sr.retry)
			}
		})
	}
}

func TestSSEReaderLongLine(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	sr := newSSEReader(strings.NewReader("data: " + long + "\n\n"))
	ev, err := sr.Next()
	if err != nil || ev.Data != long {
		t.Fatalf("%d bytes, %v", len(ev.Data), err)
	}
	sr = newSSEReader(strings.NewReader("data: " + strings.Repeat("x", maxSSELine+1) + "\n\n"))
	if _, err := sr.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("a line over the limit: %v", err)
	}
}

func TestPreferenceApplied(t *testing.T) {
	for v, want := range map[string]bool{"wait=25": true, "respond-async, wait=3": true, "Wait = 1": true, "return=minimal": false, "": false} {
		h := map[string][]string{}
		if v != "" {
			h["Preference-Applied"] = []string{v}
		}
		if got := preferenceApplied(h); got != want {
			t.Errorf("%q: %v", v, got)
		}
	}
}

func TestBackoff(t *testing.T) {
	p := RetryPolicy{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}.withDefaults()
	for n := 1; n <= 10; n++ {
		d := p.backoff(n, 0)
		lo := min(100*time.Millisecond<<(n-1), time.Second) / 2
		if d < lo || d > time.Second {
			t.Fatalf("retry %d: %v outside [%v, 1s]", n, d, lo)
		}
	}
	if d := p.backoff(1, 700*time.Millisecond); d != 700*time.Millisecond {
		t.Fatalf("Retry-After not honoured: %v", d)
	}
	if d := p.backoff(1, time.Hour); d != time.Second {
		t.Fatalf("not capped: %v", d)
	}
}
