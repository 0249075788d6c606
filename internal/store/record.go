package store

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// decodeRecord turns a record's field/value pairs into the representation,
// events included. Fields it does not know, such as pacing state ("~caller"),
// are ignored.
func decodeRecord(id string, flat []any) (*domain.Request, error) {
	return decodeRecordOpt(id, flat, true)
}

// decodeRecordOpt is decodeRecord that parses the events ("e") only when
// withEvents is set: only the events route serves them, and a poll's answer
// does not carry them (Request.Events is never marshalled).
func decodeRecordOpt(id string, flat []any, withEvents bool) (*domain.Request, error) {
	r := &domain.Request{ID: id}
	var events string
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		switch k {
		case "s":
			r.Status = codeStatus[v]
		case "v":
			r.Version, _ = strconv.ParseInt(v, 10, 64)
		case "t":
			r.Type = v
		case "c":
			r.Context = json.RawMessage(v)
		case "g":
			r.Progress = json.RawMessage(v)
		case "rt":
			r.ResultType = v
		case "r":
			r.Result = json.RawMessage(v)
		case "f":
			r.Failure = json.RawMessage(v)
		case "x":
			r.Cancellation = json.RawMessage(v)
		case "b":
			r.CreatedBy = v
		case "ca":
			r.CreatedAt = msTime(v)
		case "ua":
			r.UpdatedAt = msTime(v)
		case "co":
			t := msTime(v)
			r.CompletedAt = &t
		case "ex":
			t := msTime(v)
			r.ExpiresAt = &t
		case "e":
			events = v
		}
	}
	if r.Status == "" {
		return nil, backend("decode request "+id, fmt.Errorf("record without status"))
	}
	r.Done = r.Status.Terminal()
	if withEvents {
		r.Events = decodeEvents(events)
	}
	return r, nil
}

func msTime(v string) domain.Time {
	n, _ := strconv.ParseInt(v, 10, 64)
	return domain.TimeMs(n)
}

// decodeEvents reads "at,from,to,by;at,from,to,by" (from empty for the first).
func decodeEvents(v string) []domain.Event {
	if v == "" {
		return nil
	}
	parts := strings.Split(v, ";")
	out := make([]domain.Event, 0, len(parts))
	for i, p := range parts {
		f := strings.SplitN(p, ",", 4)
		if len(f) != 4 {
			continue
		}
		ev := domain.Event{Seq: i + 1, At: msTime(f[0]), To: codeStatus[f[2]], By: f[3]}
		if f[1] != "" {
			from := codeStatus[f[1]]
			ev.From = &from
		}
		out = append(out, ev)
	}
	return out
}
