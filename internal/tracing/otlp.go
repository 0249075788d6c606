package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// exporter sends spans to an OTLP/HTTP collector as the official
// otlptracehttp exporter does (binary protobuf, POST to the traces URL), but
// writes the ExportTraceServiceRequest straight from the spans into one
// reused buffer. The official exporter first builds the request as Go
// protobuf messages, about 30 allocations a span, then marshals them: at
// 100% sampling that was half of what tracing cost an answer
// (docs/performance.md, "Tracing"). TestExporterWritesWhatTheOfficialExporterWrites
// decodes both exporters' bytes with the official OTLP module and compares.
//
// Only the queue's one goroutine calls ExportSpans, so buf needs no lock of
// its own; it is reused once the transport has let go of it (body).
type exporter struct {
	url     string
	headers map[string]string
	client  *http.Client
	buf     []byte
	// groups is each span's index among the batch's (resource, scope)
	// pairs, reused between batches.
	groups []int
	keys   []groupKey

	mu     sync.Mutex
	closed bool
}

// groupKey is what puts spans in one ResourceSpans and one ScopeSpans.
type groupKey struct {
	res   attribute.Distinct
	r     *resource.Resource
	scope instrumentation.Scope
}

// maxResponse bounds the collector's answer read: an ExportTraceServiceResponse
// is a count and a message.
const maxResponse = 64 << 10

func newExporter(url string, headers map[string]string) *exporter {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// One goroutine exports: one idle connection is all it reuses.
	tr.MaxIdleConnsPerHost = 1
	return &exporter{url: url, headers: headers, client: &http.Client{Transport: tr}}
}

// rejectedError is a collector's partial success: it took the batch but
// rejected n of its spans.
type rejectedError struct {
	n   int64
	msg string
}

func (e *rejectedError) Error() string {
	return fmt.Sprintf("the collector rejected %d spans: %s", e.n, e.msg)
}

// ExportSpans sends spans in one request; ctx bounds it.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return errors.New("tracing: export after shutdown")
	}
	e.buf = e.encode(e.buf[:0], spans)
	b := &body{b: e.buf}
	// The transport may still read the body after Do returns (a collector
	// that answers before reading it all); the buffer is reused only after
	// b.Close, which waits for a read in progress and ends later ones.
	defer b.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, b)
	if err != nil {
		return fmt.Errorf("tracing: export request: %w", err)
	}
	req.ContentLength = int64(len(e.buf))
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "asyncstatus")
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("tracing: export: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("tracing: export: reading the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The collector's words are not logged: they may quote the request.
		return fmt.Errorf("tracing: export: the collector answered %s", resp.Status)
	}
	if resp.Header.Get("Content-Type") != "application/x-protobuf" {
		return nil
	}
	if n, msg := partialSuccess(answer); n > 0 {
		return &rejectedError{n: min(n, int64(len(spans))), msg: msg}
	}
	return nil
}

// Shutdown ends exports and closes the idle connection.
func (e *exporter) Shutdown(context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return nil
}

// partialSuccess reads ExportTraceServiceResponse.partial_success
// (rejected_spans, error_message); 0 when absent or unreadable.
func partialSuccess(b []byte) (int64, string) {
	ps, ok := field(b, 1, protowire.BytesType)
	if !ok {
		return 0, ""
	}
	var n int64
	var msg string
	for len(ps) > 0 {
		num, typ, l := protowire.ConsumeTag(ps)
		if l < 0 {
			return 0, ""
		}
		ps = ps[l:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, l := protowire.ConsumeVarint(ps)
			if l < 0 {
				return 0, ""
			}
			n, ps = int64(v), ps[l:]
		case num == 2 && typ == protowire.BytesType:
			v, l := protowire.ConsumeBytes(ps)
			if l < 0 {
				return 0, ""
			}
			msg, ps = string(v), ps[l:]
		default:
			l := protowire.ConsumeFieldValue(num, typ, ps)
			if l < 0 {
				return 0, ""
			}
			ps = ps[l:]
		}
	}
	return n, msg
}

// field is the last value of field num of type typ in message b.
func field(b []byte, num protowire.Number, typ protowire.Type) ([]byte, bool) {
	var out []byte
	found := false
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, false
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(n, t, b)
		if l < 0 {
			return nil, false
		}
		if n == num && t == typ {
			v, _ := protowire.ConsumeBytes(b[:l])
			out, found = v, true
		}
		b = b[l:]
	}
	return out, found
}

// body is a request body over the exporter's buffer that can be taken back:
// after Close, Read returns io.EOF and no longer touches the buffer.
type body struct {
	mu     sync.Mutex
	b      []byte
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.b)
	b.b = b.b[n:]
	return n, nil
}

func (b *body) Close() error {
	b.mu.Lock()
	b.closed = true
	b.b = nil
	b.mu.Unlock()
	return nil
}

// The OTLP field numbers written (opentelemetry-proto, trace/v1, common/v1,
// resource/v1, collector/trace/v1).
const (
	fRequestResourceSpans = 1

	fResourceSpansResource   = 1
	fResourceSpansScopeSpans = 2
	fResourceSpansSchemaURL  = 3
	fResourceAttributes      = 1

	fScopeSpansScope     = 1
	fScopeSpansSpans     = 2
	fScopeSpansSchemaURL = 3
	fScopeName           = 1
	fScopeVersion        = 2
	fScopeAttributes     = 3

	fSpanTraceID           = 1
	fSpanSpanID            = 2
	fSpanTraceState        = 3
	fSpanParentSpanID      = 4
	fSpanName              = 5
	fSpanKind              = 6
	fSpanStart             = 7
	fSpanEnd               = 8
	fSpanAttributes        = 9
	fSpanDroppedAttributes = 10
	fSpanEvents            = 11
	fSpanDroppedEvents     = 12
	fSpanLinks             = 13
	fSpanDroppedLinks      = 14
	fSpanStatus            = 15
	fSpanFlags             = 16

	fEventTime              = 1
	fEventName              = 2
	fEventAttributes        = 3
	fEventDroppedAttributes = 4

	fLinkTraceID           = 1
	fLinkSpanID            = 2
	fLinkTraceState        = 3
	fLinkAttributes        = 4
	fLinkDroppedAttributes = 5
	fLinkFlags             = 6

	fStatusMessage = 2
	fStatusCode    = 3

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKvlist = 6
	fAnyBytes  = 7

	fListValues = 1 // ArrayValue.values, KeyValueList.values

	// SpanFlags: the W3C flags are the low byte; the span says whether it
	// knows if its parent is remote, and whether it is.
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// encode appends the ExportTraceServiceRequest of spans to b: one
// ResourceSpans per resource, one ScopeSpans per scope in it, in the order
// first seen.
func (e *exporter) encode(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	e.keys = e.keys[:0]
	e.groups = e.groups[:0]
	for _, s := range spans {
		k := groupKey{r: s.Resource(), scope: s.InstrumentationScope()}
		k.res = k.r.Equivalent()
		g := -1
		for i := range e.keys {
			if e.keys[i].res == k.res && e.keys[i].scope == k.scope {
				g = i
				break
			}
		}
		if g < 0 {
			g = len(e.keys)
			e.keys = append(e.keys, k)
		}
		e.groups = append(e.groups, g)
	}
	for ri := range e.keys {
		r := e.keys[ri]
		if firstOfResource(e.keys, ri) != ri {
			continue
		}
		var rs int
		b, rs = openMsg(b, fRequestResourceSpans)
		if r.r != nil {
			var res int
			b, res = openMsg(b, fResourceSpansResource)
			for it := r.r.Iter(); it.Next(); {
				b = appendKeyValue(b, fResourceAttributes, it.Attribute())
			}
			b = closeMsg(b, res)
		}
		for si := ri; si < len(e.keys); si++ {
			if e.keys[si].res != r.res {
				continue
			}
			b = e.appendScopeSpans(b, si, spans)
		}
		if url := r.r.SchemaURL(); url != "" {
			b = appendString(b, fResourceSpansSchemaURL, url)
		}
		b = closeMsg(b, rs)
	}
	return b
}

// firstOfResource is the index of the first key with keys[i]'s resource.
func firstOfResource(keys []groupKey, i int) int {
	for j := range i {
		if keys[j].res == keys[i].res {
			return j
		}
	}
	return i
}

// appendScopeSpans appends the ScopeSpans of group g.
func (e *exporter) appendScopeSpans(b []byte, g int, spans []sdktrace.ReadOnlySpan) []byte {
	scope := e.keys[g].scope
	b, ss := openMsg(b, fResourceSpansScopeSpans)
	if scope != (instrumentation.Scope{}) {
		var sc int
		b, sc = openMsg(b, fScopeSpansScope)
		b = appendString(b, fScopeName, scope.Name)
		b = appendString(b, fScopeVersion, scope.Version)
		for it := scope.Attributes.Iter(); it.Next(); {
			b = appendKeyValue(b, fScopeAttributes, it.Attribute())
		}
		b = closeMsg(b, sc)
	}
	for i, s := range spans {
		if e.groups[i] == g {
			b = appendSpan(b, s)
		}
	}
	b = appendString(b, fScopeSpansSchemaURL, scope.SchemaURL)
	return closeMsg(b, ss)
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	b, sp := openMsg(b, fScopeSpansSpans)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, fSpanTraceID, tid[:])
	b = appendBytes(b, fSpanSpanID, sid[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		b = appendString(b, fSpanTraceState, ts.String())
	}
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, fSpanParentSpanID, psid[:])
	}
	b = appendString(b, fSpanName, s.Name())
	if k := s.SpanKind(); k >= 1 && k <= 5 {
		// trace.SpanKind and OTLP's enum number the kinds alike.
		b = appendVarint(b, fSpanKind, uint64(k))
	}
	b = appendFixed64(b, fSpanStart, nanos(s.StartTime().UnixNano()))
	b = appendFixed64(b, fSpanEnd, nanos(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, fSpanAttributes, kv)
	}
	b = appendVarint(b, fSpanDroppedAttributes, count(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		var em int
		b, em = openMsg(b, fSpanEvents)
		b = appendFixed64(b, fEventTime, nanos(ev.Time.UnixNano()))
		b = appendString(b, fEventName, ev.Name)
		for _, kv := range ev.Attributes {
			b = appendKeyValue(b, fEventAttributes, kv)
		}
		b = appendVarint(b, fEventDroppedAttributes, count(ev.DroppedAttributeCount))
		b = closeMsg(b, em)
	}
	b = appendVarint(b, fSpanDroppedEvents, count(s.DroppedEvents()))
	for _, l := range s.Links() {
		var lm int
		b, lm = openMsg(b, fSpanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = appendBytes(b, fLinkTraceID, ltid[:])
		b = appendBytes(b, fLinkSpanID, lsid[:])
		if ts := l.SpanContext.TraceState(); ts.Len() > 0 {
			b = appendString(b, fLinkTraceState, ts.String())
		}
		for _, kv := range l.Attributes {
			b = appendKeyValue(b, fLinkAttributes, kv)
		}
		b = appendVarint(b, fLinkDroppedAttributes, count(l.DroppedAttributeCount))
		b = appendFixed32(b, fLinkFlags, flags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()))
		b = closeMsg(b, lm)
	}
	b = appendVarint(b, fSpanDroppedLinks, count(s.DroppedLinks()))
	// The status is always written, as the official exporter does, even
	// when unset.
	st := s.Status()
	var stm int
	b, stm = openMsg(b, fSpanStatus)
	b = appendString(b, fStatusMessage, st.Description)
	switch st.Code {
	case codes.Ok:
		b = appendVarint(b, fStatusCode, 1)
	case codes.Error:
		b = appendVarint(b, fStatusCode, 2)
	}
	b = closeMsg(b, stm)
	b = appendFixed32(b, fSpanFlags, flags(sc.TraceFlags(), parent.IsRemote()))
	return closeMsg(b, sp)
}

func flags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if remote {
		f |= flagIsRemote
	}
	return f
}

func nanos(n int64) uint64 { return uint64(max(0, n)) }

func count(n int) uint64 {
	return uint64(min(max(0, int64(n)), math.MaxUint32))
}

// appendKeyValue appends a KeyValue as field num. The value is always
// written, an empty AnyValue for an empty attribute, and a oneof member is
// written even when zero: its presence is the value's type.
func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b, m := openMsg(b, num)
	b = appendString(b, fKeyValueKey, string(kv.Key))
	b = appendAnyValue(b, fKeyValueValue, kv.Value)
	return closeMsg(b, m)
}

func appendAnyValue(b []byte, num protowire.Number, v attribute.Value) []byte {
	b, m := openMsg(b, num)
	switch v.Type() {
	case attribute.BOOL:
		b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		b = protowire.AppendString(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, fAnyBytes, protowire.BytesType)
		b = protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		b = appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		b = appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		b = appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		b = appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		b = appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		var l int
		b, l = openMsg(b, fAnyKvlist)
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, fListValues, kv)
		}
		b = closeMsg(b, l)
	case attribute.EMPTY:
	default:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		b = protowire.AppendString(b, "INVALID")
	}
	return closeMsg(b, m)
}

// appendArray appends an ArrayValue of vs (AnyValue.array_value).
func appendArray[T any](b []byte, vs []T, value func(T) attribute.Value) []byte {
	b, m := openMsg(b, fAnyArray)
	for _, v := range vs {
		b = appendAnyValue(b, fListValues, value(v))
	}
	return closeMsg(b, m)
}

// openMsg starts an embedded message as field num: its tag and one byte
// for its length, which closeMsg fills (most of the messages written are
// shorter than 128 bytes). at is where the length byte is.
func openMsg(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return append(b, 0), len(b)
}

// closeMsg writes the length of the message opened at at, moving the
// message when its length needs more than one byte.
func closeMsg(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	extra := protowire.SizeVarint(uint64(n)) - 1
	var room [9]byte
	b = append(b, room[:extra]...)
	copy(b[at+1+extra:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

// appendString appends a string field; proto3 leaves an empty one out.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}
