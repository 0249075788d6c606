package httpapi_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestStreamLineEnds: a progress message holding CR, LF and CRLF cannot
// start a field of the API's event stream: read as a browser reads it (every
// CR, LF or CRLF ends a line), each event has only id, event and data, and
// its data is the request with the message intact.
func TestStreamLineEnds(t *testing.T) {
	p := newReplicaPair(t, testenv.Backends()[0], nil, nil)
	id, tok := p.create(t)
	const msg = "step\rretry: 86400000\r\revent: evil\ndata: x\r\nid: 9\r\n\r\nend"
	body, _ := json.Marshal(map[string]any{"percent": 10, "message": msg})
	p.transition(t, id, "processing", string(body))
	later(t, 300*time.Millisecond, func() { p.transition(t, id, "cancel", "") })
	res := openStream(t, p.urlA+"/v1/requests/"+id+"/stream?poll_token="+tok)
	br := bufio.NewReader(res.Body)
	var events []map[string]string
	cur := map[string]string{}
	for {
		line, err := testenv.ReadSSELine(br)
		if err != nil {
			break // the stream ends after the terminal event
		}
		switch {
		case line == "":
			if len(cur) > 0 {
				events = append(events, cur)
			}
			cur = map[string]string{}
		case strings.HasPrefix(line, ":"):
		default:
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch name {
			case "retry":
				if value != "2000" {
					t.Errorf("retry %q: a value started a field", value)
				}
				continue
			case "id", "event", "data":
			default:
				t.Errorf("field %q (%q): a value started a field", name, value)
			}
			if _, dup := cur[name]; dup {
				t.Errorf("field %q twice in one event: a value split the event", name)
			}
			cur[name] = value
		}
	}
	if len(events) != 2 {
		t.Fatalf("%d events, want 2 (processing, cancelled): %q", len(events), events)
	}
	var r struct {
		Progress struct{ Message string } `json:"progress"`
	}
	if events[0]["event"] != "request" || json.Unmarshal([]byte(events[0]["data"]), &r) != nil || r.Progress.Message != msg {
		t.Fatalf("first event %q: the message did not come back whole", events[0])
	}
}
