package console_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestLiveStreamLineEnds: a progress message holding CR, LF and CRLF cannot
// start a field of the console's live stream: read as a browser reads it
// (every CR, LF or CRLF ends a line), the stream has only data and event
// fields after its own retry, and the message comes back whole in one event.
func TestLiveStreamLineEnds(t *testing.T) {
	s := newStack(t, miniredis(), stackOptions{live: time.Hour})
	admin, _ := s.key(t, "acme", adminScopes)
	r := s.create(t, "acme", "x")
	const msg = "step\rretry: 86400000\r\revent: evil\ndata: x\r\nid: 9\r\n\r\nend"
	prog, _ := json.Marshal(map[string]any{"percent": 10, "message": msg})
	if _, err := s.st.MarkProcessing(ctx, domain.TransitionParams{Call: domain.Call{Tenant: "acme", By: "key_w"}, ID: r.ID},
		domain.ProgressInput{Progress: prog}); err != nil {
		t.Fatal(err)
	}
	c := s.mustSignIn(t, admin)
	req, _ := http.NewRequest(http.MethodGet, s.url+"/t/acme/requests/"+r.ID+"/live", nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// the first event (the current state) is all this test reads
	br := bufio.NewReader(resp.Body)
	var fields []string
	var event strings.Builder
	deadline := time.AfterFunc(10*time.Second, func() { resp.Body.Close() })
	defer deadline.Stop()
	for done := false; !done; {
		line, err := testenv.ReadSSELine(br)
		if err != nil {
			t.Fatalf("stream ended before its first event: %v (fields %q)", err, fields)
		}
		switch {
		case line == "":
			done = event.Len() > 0
		case strings.HasPrefix(line, ":"):
		default:
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			fields = append(fields, name)
			switch name {
			case "retry":
				if value != "2000" {
					t.Errorf("retry %q: only the console's own retry may be sent", value)
				}
			case "data":
				event.WriteString(value + "\n")
			case "event":
				if value != "fragment" {
					t.Errorf("event %q: a message started an event", value)
				}
			default:
				t.Errorf("field %q (%q): a message started a field", name, value)
			}
		}
	}
	want := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(msg)
	if !strings.Contains(event.String(), want) {
		t.Errorf("the message did not come back whole in the event's data:\n%s", event.String())
	}
}
