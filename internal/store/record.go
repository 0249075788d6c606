package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// A record is one Redis string: recordFields fields joined by recordSep, in the
// order of the constants below. This is the one definition of the layout: the
// scripts read and rewrite records through the constants recordConstants
// hands them (F_STATUS for fStatus, ...); Go builds the first record
// (newRecord) and decodes every one it is given. No value can contain
// recordSep: JSON texts hold control characters only escaped, and types, key
// ids and numbers are plain. created_at is the id's own UUIDv7 millisecond, so
// it is not stored.
//
// Why a string and not a hash: a hash is compact (listpack) only while every value
// is at most 64 bytes, and a request's context and result are usually longer; as a
// hashtable, the reference request's record took 1,368 B of Redis memory. As one
// string without field names, with times as small offsets from the id's own
// created_at, it takes about 600 B (docs/performance.md has the figures).
const recordSep = '\x1f'

// Field positions (0-based) in a record. rec_head in lib.lua reads the
// status, the type and expires_at by a pattern of their own, so those three
// keep positions 0, 2 and 3 (TestRecordLayoutConstants).
const (
	fStatus       = iota // status letter (statusCode)
	fVersion             // version, from 1
	fType                // request type
	fExpires             // expires_at (unix ms), "" while it does not expire
	fCreatedBy           // created_by (key id)
	fUpdated             // updated_at - created_at (ms)
	fCompleted           // completed_at - created_at (ms), "" until terminal
	fEvents              // events after the first: "<to><ms since created_at>[@<by>]" joined by ",", "@by" only when by differs from created_by
	fResultType          // result type
	fContext             // context (JSON)
	fProgress            // progress (JSON)
	fResult              // result (JSON)
	fFailure             // failure (JSON)
	fCancellation        // cancellation (JSON)
	fLabels              // labels in their canonical spelling (domain.Labels), "" for none; absent from records written before labels
	fTrace               // the create's kept trace context (Tracer.KeepContext: a traceparent, at most MaxTraceBytes), "" untraced; absent from records written before tracing
	recordFields
)

// recordFieldNames are the fields' names in the scripts' constants (F_<name>).
var recordFieldNames = [recordFields]string{
	fStatus: "STATUS", fVersion: "VERSION", fType: "TYPE", fExpires: "EXPIRES", fCreatedBy: "CREATED_BY",
	fUpdated: "UPDATED", fCompleted: "COMPLETED", fEvents: "EVENTS", fResultType: "RESULT_TYPE",
	fContext: "CONTEXT", fProgress: "PROGRESS", fResult: "RESULT", fFailure: "FAILURE", fCancellation: "CANCELLATION",
	fLabels: "LABELS", fTrace: "TRACE",
}

// MaxTraceBytes bounds the kept trace context of a record (reference §17): a
// longer one is not kept.
const MaxTraceBytes = 312

// recordConstants hands the layout to the scripts: F_<name>, each field's
// position in the table rec_split returns (1-based), and RECORD_FIELDS, both
// written into the code as numbers (inline), and RECORD_SPLIT, the
// string.match pattern with one capture per field.
func recordConstants() []luaConst {
	out := make([]luaConst, 0, recordFields+2)
	for i, n := range recordFieldNames {
		out = append(out, luaConst{"F_" + n, inlineInt(i + 1)})
	}
	sep := string(rune(recordSep))
	split := "^" + strings.Repeat("([^"+sep+"]*)"+sep, recordFields-1) + "(.*)$"
	return append(out, luaConst{"RECORD_FIELDS", inlineInt(recordFields)}, luaConst{"RECORD_SPLIT", split})
}

// newRecord is the record of a request just created: queued, version 1, updated
// at its created_at. No value may hold recordSep; validated JSON cannot (control
// characters only appear escaped), nor can a valid type or key id. Its last
// field, the kept trace context, is empty: Create appends one when the call
// is traced.
func newRecord(typ, createdBy string, context json.RawMessage, labels domain.Labels) string {
	var b strings.Builder
	b.Grow(26 + len(typ) + len(createdBy) + len(context) + len(labels))
	b.WriteString(statusCode[domain.StatusQueued])
	b.WriteString("\x1f1\x1f")
	b.WriteString(typ)
	b.WriteString("\x1f\x1f")
	b.WriteString(createdBy)
	b.WriteString("\x1f0\x1f\x1f\x1f\x1f")
	b.Write(context)
	b.WriteString("\x1f\x1f\x1f\x1f\x1f")
	b.WriteString(string(labels))
	b.WriteByte(recordSep)
	return b.String()
}

// decodeRecord turns a record into the representation; events are decoded only
// with withEvents (only the events route serves them, and a poll's answer does not
// carry them: Request.Events is never marshalled).
func decodeRecord(id, rec string, withEvents bool) (*domain.Request, error) {
	ca, ok := idMillis(id)
	if !ok {
		return nil, backend("decode request "+id, errors.New("not a request id"))
	}
	// One copy of the record backs every JSON member (json.RawMessage is a byte
	// slice), instead of one copy each; the other fields stay substrings of rec.
	b := []byte(rec)
	var f [recordFields]string
	var pos [recordFields + 1]int
	rest := rec
	last := recordFields - 1
	for i := 0; i < last; i++ {
		j := strings.IndexByte(rest, recordSep)
		if j < 0 && (i == fLabels-1 || i == fTrace-1) {
			// A record written before labels (its last field is the
			// cancellation, and it has no labels) or before tracing (no
			// kept trace context).
			last = i
			break
		}
		if j < 0 {
			return nil, backend("decode request "+id, fmt.Errorf("record has %d fields, want %d", i+1, recordFields))
		}
		f[i], rest = rest[:j], rest[j+1:]
		pos[i+1] = pos[i] + j + 1
	}
	f[last] = rest
	pos[last+1] = len(rec) + 1
	for i := last + 1; i <= recordFields; i++ {
		pos[i] = pos[last+1]
	}
	raw := func(i int) json.RawMessage {
		if pos[i+1]-1 == pos[i] {
			return nil
		}
		return b[pos[i] : pos[i+1]-1 : pos[i+1]-1]
	}
	st, known := codeStatus[f[fStatus]]
	if !known {
		return nil, backend("decode request "+id, fmt.Errorf("record with status %q", f[fStatus]))
	}
	r := &domain.Request{ID: id, Status: st, Done: st.Terminal(), Type: f[fType], CreatedBy: f[fCreatedBy],
		ResultType: f[fResultType], CreatedAt: domain.TimeMs(ca)}
	r.Version, _ = strconv.ParseInt(f[fVersion], 10, 64)
	r.UpdatedAt = domain.TimeMs(ca + atoi(f[fUpdated]))
	if v := f[fCompleted]; v != "" {
		t := domain.TimeMs(ca + atoi(v))
		r.CompletedAt = &t
	}
	if v := f[fExpires]; v != "" {
		t := domain.TimeMs(atoi(v))
		r.ExpiresAt = &t
	}
	r.Context = raw(fContext)
	r.Progress = raw(fProgress)
	r.Result = raw(fResult)
	r.Failure = raw(fFailure)
	r.Cancellation = raw(fCancellation)
	r.Labels = domain.Labels(f[fLabels])
	r.TraceContext = f[fTrace]
	if withEvents {
		r.Events = decodeEvents(ca, r.CreatedBy, f[fEvents])
	}
	return r, nil
}

func atoi(v string) int64 {
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// decodeEvents rebuilds the history: the implied first event (queued at created_at
// by created_by), then each "<to><ms since created_at>[@<by>]".
func decodeEvents(ca int64, createdBy, v string) []domain.Event {
	out := make([]domain.Event, 1, 1+strings.Count(v, ",")+1)
	out[0] = domain.Event{Seq: 1, At: domain.TimeMs(ca), To: domain.StatusQueued, By: createdBy}
	if v == "" {
		return out
	}
	for p := range strings.SplitSeq(v, ",") {
		if p == "" {
			continue
		}
		to, ok := codeStatus[p[:1]]
		if !ok {
			continue
		}
		d, by, found := strings.Cut(p[1:], "@")
		if !found {
			by = createdBy
		}
		from := out[len(out)-1].To
		out = append(out, domain.Event{Seq: len(out) + 1, At: domain.TimeMs(ca + atoi(d)), From: &from, To: to, By: by})
	}
	return out
}

// idMillis is the UUIDv7 millisecond timestamp of a canonical id (its first 12 hex
// digits), without parsing the whole UUID.
func idMillis(id string) (int64, bool) {
	if len(id) != 36 || id[8] != '-' {
		return 0, false
	}
	var n int64
	for i := 0; i < 13; i++ {
		if i == 8 {
			continue
		}
		c := id[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}
