package wire

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// The two views of a request for standard long-running-operation clients
// (docs/reference.md §15): Microsoft's status monitor and Google's Operation.
// Both are built like AppendRequest, by appending, without reflection: they
// answer the same poll.

// Type URLs of the messages in a Google Operation (api/proto/asyncstatus/v1).
const (
	MetadataTypeURL  = "type.googleapis.com/asyncstatus.v1.RequestMetadata"
	ResultTypeURL    = "type.googleapis.com/asyncstatus.v1.Result"
	ErrorInfoTypeURL = "type.googleapis.com/google.rpc.ErrorInfo"
	// ErrorDomain is the ErrorInfo domain of every error we describe.
	ErrorDomain = "asyncstatus"
	// OperationPrefix starts the name of every Operation.
	OperationPrefix = "operations/"
)

// MonitorStatus is a status in the words of Microsoft's REST API guidelines,
// which the Azure pollers know: expired is a failure to them.
func MonitorStatus(s domain.Status) string {
	switch s {
	case domain.StatusQueued:
		return "NotStarted"
	case domain.StatusProcessing:
		return "Running"
	case domain.StatusSucceeded:
		return "Succeeded"
	case domain.StatusCancelled:
		return "Canceled"
	}
	return "Failed" // failed, expired
}

// CancelledCode is the error code of a cancelled request in both views.
const CancelledCode = "CANCELLED"

// AppendMonitor appends r's status monitor (Azure) to b. resource is the
// absolute URL of the request, named by a succeeded monitor.
func AppendMonitor(b []byte, r *domain.Request, resource string) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"status":`...)
	b = appendString(b, MonitorStatus(r.Status))
	if pct := member(r.Progress, "percent"); len(pct) > 0 && pct[0] != 'n' {
		b = append(b, `,"percentComplete":`...)
		b = append(b, pct...)
	}
	b = append(b, `,"createdDateTime":`...)
	b = appendTime(b, r.CreatedAt)
	b = append(b, `,"lastActionDateTime":`...)
	b = appendTime(b, r.UpdatedAt)
	switch r.Status {
	case domain.StatusSucceeded:
		b = append(b, `,"resourceLocation":`...)
		b = appendString(b, resource)
	case domain.StatusFailed, domain.StatusExpired, domain.StatusCancelled:
		code, msg, err := failureOf(r)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"error":{"code":`...)
		b = appendString(b, code)
		b = append(b, `,"message":`...)
		b = appendString(b, msg)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// AppendOperation appends r as a google.longrunning.Operation (AIP-151) to b:
// the representation without result, failure and context as metadata, and
// the result as response or the failure as a google.rpc.Status error.
func AppendOperation(b []byte, r *domain.Request) ([]byte, error) {
	var err error
	b = append(b, `{"name":"`+OperationPrefix...)
	n := len(b)
	b = appendString(b, r.ID) // then drop its opening quote: the name goes on
	copy(b[n:], b[n+1:])
	b = b[:len(b)-1]
	b = append(b, `,"done":`...)
	b = strconv.AppendBool(b, r.Done)
	b = append(b, `,"metadata":{"@type":"`+MetadataTypeURL+`","id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, r.Type)
	b = append(b, `,"status":`...)
	b = appendString(b, string(r.Status))
	b = append(b, `,"done":`...)
	b = strconv.AppendBool(b, r.Done)
	if b, err = appendRaw(b, `,"progress":`, r.Progress); err != nil {
		return nil, err
	}
	b = appendStamps(b, r)
	b = append(b, '}')
	switch r.Status {
	case domain.StatusSucceeded:
		b = append(b, `,"response":{"@type":"`+ResultTypeURL+`","result_type":`...)
		b = appendString(b, r.ResultType)
		if b, err = appendRaw(b, `,"result":`, r.Result); err != nil {
			return nil, err
		}
		b = append(b, '}')
	case domain.StatusFailed, domain.StatusExpired, domain.StatusCancelled:
		code, msg, err := failureOf(r)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"error":{"code":`...)
		b = strconv.AppendInt(b, int64(RPCCodeOf(r.Status, code)), 10)
		b = append(b, `,"message":`...)
		b = appendString(b, msg)
		b = AppendErrorInfo(append(b, `,"details":[`...), code)
		b = append(b, "]}"...)
	}
	return append(b, '}'), nil
}

// AppendErrorInfo appends a google.rpc.ErrorInfo naming reason (one of our
// codes) in our domain.
func AppendErrorInfo(b []byte, reason string) []byte {
	b = append(b, `{"@type":"`+ErrorInfoTypeURL+`","reason":`...)
	b = appendString(b, reason)
	return append(b, `,"domain":"`+ErrorDomain+`"}`...)
}

// google.rpc.Code values of a terminal request's error.
const (
	RPCCancelled        = 1
	RPCUnknown          = 2
	RPCDeadlineExceeded = 4
)

// RPCCodeOf is the google.rpc.Code of a request that ended in status with
// failure code: cancelled is CANCELLED, a timeout (expired, or a processing
// timeout) DEADLINE_EXCEEDED, any other failure UNKNOWN.
func RPCCodeOf(s domain.Status, code string) int {
	switch {
	case s == domain.StatusCancelled:
		return RPCCancelled
	case s == domain.StatusExpired, code == "ERR_JOB_EXECUTION_TIMED_OUT":
		return RPCDeadlineExceeded
	}
	return RPCUnknown
}

// failureOf is the code and message of a failed, expired or cancelled
// request: its failure, or CANCELLED and the reason given to cancel.
func failureOf(r *domain.Request) (code, msg string, err error) {
	if r.Status == domain.StatusCancelled {
		msg = "The request was cancelled."
		if reason, err := stringMember(r.Cancellation, "reason"); err != nil {
			return "", "", err
		} else if reason != "" {
			msg = reason
		}
		return CancelledCode, msg, nil
	}
	if code, err = stringMember(r.Failure, "code"); err != nil {
		return "", "", err
	}
	if msg, err = stringMember(r.Failure, "reason"); err != nil {
		return "", "", err
	}
	if code == "" {
		code = "FAILED"
	}
	if msg == "" {
		msg = "The request failed (" + code + ")."
	}
	return code, msg, nil
}

// stringMember decodes the string member name of the JSON object raw; "" when
// it is absent.
func stringMember(raw json.RawMessage, name string) (string, error) {
	v := member(raw, name)
	if len(v) == 0 || v[0] != '"' {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", err
	}
	return s, nil
}

// member returns the raw value of the top-level member name of the JSON
// object raw (valid JSON, as the store keeps it), or nil.
func member(raw []byte, name string) []byte {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil
	}
	i++
	for {
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] != '"' {
			return nil
		}
		kEnd := skipValue(raw, i)
		key := raw[i:kEnd]
		i = skipSpace(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return nil
		}
		vStart := skipSpace(raw, i+1)
		vEnd := skipValue(raw, vStart)
		if len(key) == len(name)+2 && string(key[1:len(key)-1]) == name {
			return raw[vStart:vEnd]
		}
		i = skipSpace(raw, vEnd)
		if i >= len(raw) || raw[i] != ',' {
			return nil
		}
		i++
	}
}

// skipValue returns the index just past the JSON value starting at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return i
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipValue(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isJSONSpace(b[i]) {
		i++
	}
	return i
}

// OperationCall is a validated body of POST /v1/operations/{id}:cancel or
// :wait (google.longrunning's CancelOperationRequest, WaitOperationRequest).
type OperationCall struct {
	// Name is the operation's name when the body gives it ("" when not).
	Name string
	// Timeout is :wait's timeout; HasTimeout false when not given.
	Timeout    time.Duration
	HasTimeout bool
}

// DecodeOperationCall validates the optional body of :cancel (members: name)
// or, with wait, of :wait (name, timeout: a google.protobuf.Duration in its
// JSON form, "25s" or "1.5s").
func DecodeOperationCall(body []byte, wait bool) (OperationCall, error) {
	var out OperationCall
	if !wait {
		var in struct {
			Name *string `json:"name"`
		}
		if err := decodeObject(body, &in, true); err != nil {
			return out, err
		}
		if in.Name != nil {
			out.Name = *in.Name
		}
		return out, nil
	}
	var in struct {
		Name    *string `json:"name"`
		Timeout *string `json:"timeout"`
	}
	if err := decodeObject(body, &in, true); err != nil {
		return out, err
	}
	if in.Name != nil {
		out.Name = *in.Name
	}
	if in.Timeout != nil {
		d, ok := protoDuration(*in.Timeout)
		if !ok {
			return out, &domain.Error{Code: domain.ValidationFailed, Message: "The request body is not valid.",
				Fields: []domain.FieldError{{Field: "timeout", Message: `must be a duration in seconds such as "25s"`}}}
		}
		out.Timeout, out.HasTimeout = d, true
	}
	return out, nil
}

// protoDuration parses google.protobuf.Duration's JSON form: a non-negative
// decimal number of seconds followed by "s".
func protoDuration(s string) (time.Duration, bool) {
	num, ok := strings.CutSuffix(s, "s")
	if !ok || num == "" || len(num) > 20 || num[0] == '-' || num[0] == '+' {
		return 0, false
	}
	for i := 0; i < len(num); i++ {
		if (num[i] < '0' || num[i] > '9') && num[i] != '.' {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f > 315576000000 { // Duration's own bound
		return 0, false
	}
	return time.Duration(min(f, 1e9) * float64(time.Second)), true // any wait is clamped far below 1e9 s
}
