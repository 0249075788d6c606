package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// lineEvents are events of every shape: created (no from), a heartbeat, a
// failure with its code, a delete (no to), strings JSON must escape (which take
// encoding/json's path), a zero time.
func lineEvents() []domain.AuditEvent {
	st := func(s domain.Status) *domain.Status { return &s }
	at := domain.Time{Time: time.Date(2026, 12, 3, 17, 30, 1, 234_000_000, time.UTC)}
	return []domain.AuditEvent{
		{EventID: "evt_0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b_1", Tenant: "acme", RequestID: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
			RequestType: "statement.export", Type: "request.created", Seq: 1, To: st(domain.StatusQueued), By: "key_0123456789abcdef", At: at, Version: 1},
		{EventID: "evt_x_3", Tenant: "acme", RequestID: "x", RequestType: "t.a", Type: "request.heartbeat", Seq: 2,
			From: st(domain.StatusProcessing), To: st(domain.StatusProcessing), By: "key_b", At: at, Version: 3},
		{EventID: "evt_x_4", Tenant: "acme", RequestID: "x", RequestType: "t.a", Type: "request.failed", Seq: 3,
			From: st(domain.StatusProcessing), To: st(domain.StatusFailed), By: "system", At: at, Version: 4, FailureCode: "ERR_LEDGER"},
		{EventID: "evt_x_5", Tenant: "acme", RequestID: "x", RequestType: "t.a", Type: "request.deleted", Seq: 4,
			From: st(domain.StatusFailed), By: "", At: at, Version: 5},
		{EventID: "evt_<&>_1", Tenant: "a\"b\\c\u2028", RequestID: "é", RequestType: "t\x01", Type: "request.created", Seq: 1,
			To: st(domain.StatusQueued), By: "k\ny", At: domain.Time{}, Version: 1, FailureCode: "<x>"},
	}
}

// TestLineIsEncodingJSON: Line writes the bytes encoding/json writes for the
// event, and a newline, for every shape of event.
func TestLineIsEncodingJSON(t *testing.T) {
	for _, e := range lineEvents() {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Line(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(want, '\n')) {
			t.Errorf("Line(%+v)\n got %s\nwant %s", e, got, want)
		}
	}
}

func BenchmarkLine(b *testing.B) {
	e := lineEvents()[2]
	b.Run("Line", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := Line(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
