// Package otlptest is an OTLP/HTTP trace receiver for tests: it decodes what
// an exporter sends with the official OTLP protobuf module and keeps the
// spans. Only tests import it.
package otlptest

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with its resource's attributes.
type Span struct {
	*tracepb.Span
	Resource []*commonpb.KeyValue
}

// TraceID, SpanID and ParentID are the span's ids in hex.
func (s Span) TraceID() string  { return hex.EncodeToString(s.GetTraceId()) }
func (s Span) SpanID() string   { return hex.EncodeToString(s.GetSpanId()) }
func (s Span) ParentID() string { return hex.EncodeToString(s.GetParentSpanId()) }

// Attr is the value of the span's attribute k as text, and whether it has one.
func (s Span) Attr(k string) (string, bool) { return attr(s.GetAttributes(), k) }

func attr(kvs []*commonpb.KeyValue, k string) (string, bool) {
	for _, kv := range kvs {
		if kv.GetKey() == k {
			return Text(kv.GetValue()), true
		}
	}
	return "", false
}

// Text is an attribute value as text.
func Text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return fmt.Sprint(v)
}

// AllValues is every attribute value a span carries, of the span, its
// events, its links and its resource, as "key=value" texts.
func (s Span) AllValues() []string {
	var out []string
	add := func(kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			out = append(out, kv.GetKey()+"="+Text(kv.GetValue()))
		}
	}
	add(s.GetAttributes())
	add(s.Resource)
	for _, e := range s.GetEvents() {
		out = append(out, "event="+e.GetName())
		add(e.GetAttributes())
	}
	for _, l := range s.GetLinks() {
		add(l.GetAttributes())
	}
	out = append(out, "name="+s.GetName(), "status="+s.GetStatus().GetMessage())
	return out
}

// Receiver is an OTLP/HTTP endpoint on a local port.
type Receiver struct {
	URL string // the endpoint's base URL (the exporter adds /v1/traces)

	mu    sync.Mutex
	spans []Span
	bad   []string
}

// Start runs a receiver until the test ends.
func Start(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	msg := &coltracepb.ExportTraceServiceRequest{}
	if err == nil && req.URL.Path == "/v1/traces" && req.Header.Get("Content-Type") == "application/x-protobuf" {
		err = proto.Unmarshal(body, msg)
	} else if err == nil {
		err = fmt.Errorf("%s %s with Content-Type %q", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.bad = append(r.bad, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range msg.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Span: sp, Resource: rs.GetResource().GetAttributes()})
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Bad are the exports the receiver could not read.
func (r *Receiver) Bad() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}

// Kind names a span kind as tests compare it.
func Kind(s Span) tracepb.Span_SpanKind { return s.GetKind() }
