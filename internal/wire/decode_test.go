package wire

import (
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

var lim = domain.Limits{ContextBytes: 64, ResultBytes: 64}

func fieldOf(t *testing.T, err error) string {
	t.Helper()
	e, ok := err.(*domain.Error)
	if !ok || e.Code != domain.ValidationFailed || len(e.Fields) == 0 {
		t.Fatalf("want VALIDATION_FAILED with fields, got %v", err)
	}
	return e.Fields[0].Field
}

func TestDecodeCreate(t *testing.T) {
	in, err := DecodeCreate([]byte(` {"type":"a.b", "context": { "x" : [1, 2] }, "estimated_duration_seconds": 30} `), lim)
	if err != nil || in.Type != "a.b" || string(in.Context) != `{"x":[1,2]}` || in.EstimatedDurationSeconds != 30 {
		t.Fatalf("%+v %v", in, err)
	}
	if in, err := DecodeCreate([]byte(`{"type":"a","context":null}`), lim); err != nil || in.Context != nil {
		t.Fatalf("null context: %+v %v", in, err)
	}
	for body, field := range map[string]string{
		`{"type":"A"}`: "type", `{"type":"` + strings.Repeat("a", 65) + `"}`: "type",
		`{"type":"a","context":{"pad":"` + strings.Repeat("x", 60) + `"}}`: "context",
		`{"type":"a","extra":1}`: "extra", `{"type":"a","estimated_duration_seconds":"5"}`: "estimated_duration_seconds",
		`{"type":"a"}{"type":"b"}`: "body", `"a"`: "body",
	} {
		_, err := DecodeCreate([]byte(body), lim)
		if got := fieldOf(t, err); got != field {
			t.Errorf("%s: field %q, want %q", body, got, field)
		}
	}
	// every bad field is named in one answer
	_, err = DecodeCreate([]byte(`{"type":"A","estimated_duration_seconds":0}`), lim)
	if e := err.(*domain.Error); len(e.Fields) != 2 {
		t.Fatalf("fields %+v", e.Fields)
	}
}

func TestDecodeComplete(t *testing.T) {
	c, err := DecodeComplete([]byte(`{"result_type":"link","result":{"url":"https://x.example/a","expires_at":"2026-11-30T11:00:00+01:00","checksum_sha256":"`+strings.Repeat("AB", 32)+`"}}`), lim)
	if err != nil || !strings.Contains(string(c.Result), `"expires_at":"2026-11-30T10:00:00.000Z"`) || !strings.Contains(string(c.Result), strings.Repeat("ab", 32)) {
		t.Fatalf("link: %s %v", c.Result, err)
	}
	c, err = DecodeComplete([]byte(`{"result_type":"confirmation","result":{"confirmed":false}}`), lim)
	if err != nil || string(c.Result) != `{"confirmed":false}` {
		t.Fatalf("confirmation: %s %v", c.Result, err)
	}
	for body, field := range map[string]string{
		`{"result_type":"link","result":{"url":"/relative","expires_at":"2026-11-30T10:00:00Z"}}`:                   "result.url",
		`{"result_type":"link","result":{"url":"https://x/a","expires_at":"tomorrow"}}`:                             "result.expires_at",
		`{"result_type":"link","result":{"url":"https://x/a","expires_at":"2026-11-30T10:00:00Z","x":1}}`:           "result.x",
		`{"result_type":"link","result":{"url":"https://x/a","expires_at":"2026-11-30T10:00:00Z","size_bytes":-1}}`: "result.size_bytes",
		`{"result_type":"answer","result":{"pad":"` + strings.Repeat("x", 60) + `"}}`:                               "result",
		`{"result_type":"confirmation","result":{}}`:                                                                "result.confirmed",
		`{"result_type":"other","result":{}}`:                                                                       "result_type",
		`{"result":{}}`:                                                                                             "result_type",
	} {
		_, err := DecodeComplete([]byte(body), lim)
		if got := fieldOf(t, err); got != field {
			t.Errorf("%s: field %q, want %q", body, got, field)
		}
	}
}

func TestDecodeTransitions(t *testing.T) {
	if p, err := DecodeProgress(nil); err != nil || p.Progress != nil {
		t.Fatalf("bare heartbeat: %+v %v", p, err)
	}
	if p, err := DecodeProgress([]byte(`{"percent":0}`)); err != nil || string(p.Progress) != `{"percent":0}` {
		t.Fatalf("percent 0 must be kept: %s %v", p.Progress, err)
	}
	if _, err := DecodeProgress([]byte(`{"message":"` + strings.Repeat("é", 257) + `"}`)); fieldOf(t, err) != "message" {
		t.Fatal("a 257-character message must be refused")
	}
	if _, err := DecodeProgress([]byte(`{"message":"` + strings.Repeat("é", 256) + `"}`)); err != nil {
		t.Fatalf("256 characters (512 bytes) are allowed: %v", err)
	}
	if f, err := DecodeFail([]byte(`{"code":"ERR_X"}`)); err != nil || string(f.Failure) != `{"code":"ERR_X"}` {
		t.Fatalf("fail: %s %v", f.Failure, err)
	}
	if _, err := DecodeFail([]byte(`{"code":"9X"}`)); fieldOf(t, err) != "code" {
		t.Fatal("bad failure code accepted")
	}
	if c, err := DecodeCancel([]byte(`{"reason":"user"}`)); err != nil || c.Reason != "user" {
		t.Fatalf("cancel: %+v %v", c, err)
	}
}

func TestNullMeansAbsent(t *testing.T) {
	if in, err := DecodeCreate([]byte(`{"type":"a","estimated_duration_seconds":null}`), lim); err != nil || in.EstimatedDurationSeconds != 0 {
		t.Fatalf("%+v %v", in, err)
	}
	if p, err := DecodeProgress([]byte(`{"percent":null}`)); err != nil || p.Progress != nil {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := DecodeProgress([]byte(`{"percent":"40"}`)); fieldOf(t, err) != "percent" {
		t.Fatal("a string percent must be refused")
	}
}
