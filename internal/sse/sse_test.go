package sse_test

import (
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/sse"
)

// parse reads an event stream as a browser does (line ends CR, LF or CRLF)
// and returns each event's fields in order, "name=value".
func parse(stream string) [][]string {
	var events [][]string
	var cur []string
	for len(stream) > 0 {
		i := strings.IndexAny(stream, "\r\n")
		if i < 0 {
			break // an unfinished line is dropped
		}
		line := stream[:i]
		if stream[i] == '\r' && i+1 < len(stream) && stream[i+1] == '\n' {
			i++
		}
		stream = stream[i+1:]
		if line == "" {
			if cur != nil {
				events = append(events, cur)
			}
			cur = nil
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		cur = append(cur, name+"="+strings.TrimPrefix(value, " "))
	}
	return events
}

// TestDataCannotStartAField: whatever line ends a value holds, the stream
// has one event whose only fields are data lines, and the data a reader joins
// back with LF is the value with its line ends made LF.
func TestDataCannotStartAField(t *testing.T) {
	for _, v := range []string{
		"plain",
		"a\rretry: 86400000\r",
		"a\nevent: evil\n\ndata: x",
		"a\r\nid: 99\r\n\r\nb",
		"\r\r\n\n",
		"",
	} {
		for name, b := range map[string][]byte{
			"bytes":  sse.AppendData([]byte("event: x\n"), []byte(v)),
			"string": sse.AppendDataString([]byte("event: x\n"), v),
		} {
			evs := parse(string(append(b, '\n')))
			if len(evs) != 1 {
				t.Fatalf("%s %q: %d events %q, want 1", name, v, len(evs), evs)
			}
			var data []string
			for _, f := range evs[0][1:] {
				d, ok := strings.CutPrefix(f, "data=")
				if !ok {
					t.Fatalf("%s %q: field %q besides data", name, v, f)
				}
				data = append(data, d)
			}
			want := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(v)
			if got := strings.Join(data, "\n"); got != want {
				t.Errorf("%s %q: data %q, want %q", name, v, got, want)
			}
		}
	}
}
