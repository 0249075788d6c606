package wire_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// lroRequest is a request in status st with what such a request holds.
func lroRequest(st domain.Status) *domain.Request {
	at := domain.Time{Time: time.Date(2026, 11, 29, 10, 0, 0, 512e6, time.UTC)}
	r := &domain.Request{ID: "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", Type: "statement.export", Status: st, Done: st.Terminal(),
		Context: json.RawMessage(`{"a":1}`), CreatedBy: "key_7Hq2", CreatedAt: at, UpdatedAt: at, Version: 3,
		Progress: json.RawMessage(`{"message":"page \"4\" <of> 10","percent":40}`)}
	if st.Terminal() {
		r.CompletedAt, r.ExpiresAt = &at, &at
	}
	switch st {
	case domain.StatusSucceeded:
		r.ResultType, r.Result = "answer", json.RawMessage(`{"rows": [1, {"x":"y"}]}`)
	case domain.StatusFailed:
		r.Failure = domain.FailureJSON("ERR_JOB_EXECUTION_TIMED_OUT", "no heartbeat <in> time")
	case domain.StatusExpired:
		r.Failure = domain.FailureJSON("REQUEST_EXPIRED", "")
	case domain.StatusCancelled:
		r.Cancellation = json.RawMessage(`{"reason":"not \u00e9 needed"}`)
	}
	return r
}

func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return m
}

// TestAppendMonitor: the status monitor of every status, against the shape
// docs/reference.md §15 gives it.
func TestAppendMonitor(t *testing.T) {
	base := map[string]any{"id": "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a", "percentComplete": float64(40),
		"createdDateTime": "2026-11-29T10:00:00.512Z", "lastActionDateTime": "2026-11-29T10:00:00.512Z"}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	errOf := func(code, msg string) map[string]any { return map[string]any{"code": code, "message": msg} }
	for st, want := range map[domain.Status]map[string]any{
		domain.StatusQueued:     with("status", "NotStarted"),
		domain.StatusProcessing: with("status", "Running"),
		domain.StatusSucceeded:  with("status", "Succeeded", "resourceLocation", "https://x.example/v1/requests/1?a=<b>"),
		domain.StatusFailed:     with("status", "Failed", "error", errOf("ERR_JOB_EXECUTION_TIMED_OUT", "no heartbeat <in> time")),
		domain.StatusExpired:    with("status", "Failed", "error", errOf("REQUEST_EXPIRED", "The request failed (REQUEST_EXPIRED).")),
		domain.StatusCancelled:  with("status", "Canceled", "error", errOf("CANCELLED", "not é needed")),
	} {
		b, err := wire.AppendMonitor([]byte("x"), lroRequest(st), "https://x.example/v1/requests/1?a=<b>")
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeJSON(t, b[1:]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", st, got, want)
		}
	}
	r := lroRequest(domain.StatusQueued)
	r.Progress = nil
	if got := decodeJSON(t, must(wire.AppendMonitor(nil, r, ""))); got["percentComplete"] != nil {
		t.Errorf("no progress, percentComplete %v", got["percentComplete"])
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestAppendOperation: an Operation of every status: the metadata is the
// representation without context, result and failure, a succeeded one has
// response, the others an error with its google.rpc code and an ErrorInfo.
func TestAppendOperation(t *testing.T) {
	for _, st := range domain.Statuses {
		r := lroRequest(st)
		got := decodeJSON(t, must(wire.AppendOperation(nil, r)))
		rep := decodeJSON(t, must(wire.AppendRequest(nil, r)))
		for _, k := range []string{"context", "result", "result_type", "failure", "cancellation"} {
			delete(rep, k)
		}
		rep["@type"] = "type.googleapis.com/asyncstatus.v1.RequestMetadata"
		if got["name"] != "operations/"+r.ID || got["done"] != r.Done || !reflect.DeepEqual(got["metadata"], rep) {
			t.Errorf("%s: %v\nmetadata want %v", st, got, rep)
		}
		response, hasResponse := got["response"]
		e, hasError := got["error"].(map[string]any)
		switch st {
		case domain.StatusSucceeded:
			want := map[string]any{"@type": "type.googleapis.com/asyncstatus.v1.Result", "result_type": "answer",
				"result": map[string]any{"rows": []any{float64(1), map[string]any{"x": "y"}}}}
			if !reflect.DeepEqual(response, want) || hasError {
				t.Errorf("succeeded: %v", got)
			}
		case domain.StatusQueued, domain.StatusProcessing:
			if hasResponse || hasError {
				t.Errorf("%s: %v", st, got)
			}
		default:
			code := map[domain.Status]float64{domain.StatusFailed: 4, domain.StatusExpired: 4, domain.StatusCancelled: 1}[st]
			reason := map[domain.Status]string{domain.StatusFailed: "ERR_JOB_EXECUTION_TIMED_OUT", domain.StatusExpired: "REQUEST_EXPIRED",
				domain.StatusCancelled: "CANCELLED"}[st]
			info := []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "asyncstatus"}}
			if hasResponse || !hasError || e["code"] != code || e["message"] == "" || !reflect.DeepEqual(e["details"], info) {
				t.Errorf("%s: %v", st, got)
			}
		}
	}
	r := lroRequest(domain.StatusFailed)
	r.Failure = domain.FailureJSON("ERR_UPSTREAM", "down")
	if e := decodeJSON(t, must(wire.AppendOperation(nil, r)))["error"].(map[string]any); e["code"] != float64(2) || e["message"] != "down" {
		t.Errorf("another failure: %v", e)
	}
}

// TestDecodeOperationCall: :cancel takes only a name; :wait a name and a
// google.protobuf.Duration.
func TestDecodeOperationCall(t *testing.T) {
	for _, c := range []struct {
		body string
		wait bool
		want wire.OperationCall
		bad  bool
	}{
		{"", false, wire.OperationCall{}, false},
		{`{"name":"operations/x"}`, false, wire.OperationCall{Name: "operations/x"}, false},
		{`{"timeout":"1s"}`, false, wire.OperationCall{}, true},
		{`{"timeout":"25s"}`, true, wire.OperationCall{Timeout: 25 * time.Second, HasTimeout: true}, false},
		{`{"timeout":"1.5s","name":"operations/y"}`, true, wire.OperationCall{Name: "operations/y", Timeout: 1500 * time.Millisecond, HasTimeout: true}, false},
		{`{"timeout":"0s"}`, true, wire.OperationCall{HasTimeout: true}, false},
		{`{"timeout":"315576000000s"}`, true, wire.OperationCall{Timeout: 1e9 * time.Second, HasTimeout: true}, false}, // any wait is clamped
		{`{"timeout":"315576000001s"}`, true, wire.OperationCall{}, true},                                              // past Duration's range
		{`{"timeout":"-1s"}`, true, wire.OperationCall{}, true},
		{`{"timeout":"1m"}`, true, wire.OperationCall{}, true},
		{`{"timeout":"s"}`, true, wire.OperationCall{}, true},
		{`{"timeout":25}`, true, wire.OperationCall{}, true},
		{`{"name":"a","name":"b"}`, false, wire.OperationCall{}, true},
		{`[1]`, true, wire.OperationCall{}, true},
	} {
		got, err := wire.DecodeOperationCall([]byte(c.body), c.wait)
		if c.bad {
			if domain.ErrorCode(err) != domain.ValidationFailed {
				t.Errorf("%s (wait %v): %v, want VALIDATION_FAILED", c.body, c.wait, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s (wait %v): %+v %v, want %+v", c.body, c.wait, got, err, c.want)
		}
	}
}
