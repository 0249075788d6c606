package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/asyncstatus/asyncstatus/client"
)

// TestTraceContext: a call sends the traceparent and tracestate of the
// OpenTelemetry span in its context, or the ones given with
// ContextWithTraceParent, and nothing when there is neither.
func TestTraceContext(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(404)
		_, _ = w.Write([]byte(`{"code":"NOT_FOUND","status":404,"title":"Not found"}`))
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithAPIKey("ask_test_key"))
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=abc")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	for _, tc := range []struct {
		name          string
		ctx           context.Context
		parent, state string
	}{
		{"none", context.Background(), "", ""},
		{"otel span", trace.ContextWithSpanContext(context.Background(), sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=abc"},
		{"unsampled", trace.ContextWithSpanContext(context.Background(), sc.WithTraceFlags(0).WithTraceState(trace.TraceState{})),
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""},
		{"given", client.ContextWithTraceParent(trace.ContextWithSpanContext(context.Background(), sc),
			"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x=1"),
			"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Get(tc.ctx, "01a23cc7-b9b3-77ef-a05f-cf0500923ca9"); err == nil {
				t.Fatal("want the 404")
			}
			h := <-got
			if h.Get("traceparent") != tc.parent || h.Get("tracestate") != tc.state {
				t.Errorf("sent traceparent %q tracestate %q, want %q %q", h.Get("traceparent"), h.Get("tracestate"), tc.parent, tc.state)
			}
		})
	}
}
