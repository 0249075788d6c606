package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzSend posts body (with an Idempotency-Key and Content-Type from the fuzzer)
// and fails on any 5xx: no input may cause a server error or a panic.
func fuzzSend(t *testing.T, e *env, path, body, idem, ctype string) int {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.keys["acme-rw"])
	req.Header.Set("Content-Type", ctype)
	if idem != "" && !strings.ContainsAny(idem, "\r\n\x00") {
		req.Header.Set("Idempotency-Key", idem)
	}
	res, err := e.srv.App().Test(req, -1)
	if err != nil {
		return 0 // the client refused to send it; nothing reached the server
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode >= 500 {
		t.Fatalf("POST %s %q answered %d: %s", path, body, res.StatusCode, b)
	}
	if res.StatusCode >= 400 && res.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("error answer %d is not problem+json", res.StatusCode)
	}
	mustBeJSON(t, "POST "+path, body, b)
	if res.StatusCode < 300 {
		// What was accepted is echoed by every read: those must be valid too.
		var m struct{ ID string }
		_ = json.Unmarshal(b, &m)
		if m.ID != "" && strings.HasPrefix(path, "/v1/requests") {
			for _, read := range []string{"/v1/requests/" + m.ID, "/v1/requests/" + m.ID + "/events", "/v1/requests?limit=200"} {
				req := httptest.NewRequest("GET", read, nil)
				req.Header.Set("Authorization", "Bearer "+e.keys["acme-rw"])
				res, err := e.srv.App().Test(req, -1)
				if err != nil {
					t.Fatal(err)
				}
				rb, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 429 {
					mustBeJSON(t, "GET "+read, body, rb)
				}
			}
		}
	}
	return res.StatusCode
}

// mustBeJSON fails unless an answer's body is valid UTF-8 and valid JSON, as
// every answer of the service must be whatever it was sent (docs/reference.md §7).
func mustBeJSON(t *testing.T, what, sent string, answer []byte) {
	t.Helper()
	if !utf8.Valid(answer) || !json.Valid(answer) {
		t.Fatalf("%s after sending %q: the answer is not valid UTF-8 JSON: %q", what, sent, answer)
	}
}

func fuzzCreate(t *testing.T, e *env) string {
	req := httptest.NewRequest("POST", "/v1/requests", strings.NewReader(`{"type":"x"}`))
	req.Header.Set("Authorization", "Bearer "+e.keys["acme-rw"])
	req.Header.Set("Content-Type", "application/json")
	res, err := e.srv.App().Test(req, -1)
	if err != nil || res.StatusCode != 202 {
		t.Fatalf("create: %v", err)
	}
	var m struct{ ID string }
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

var createSeeds = []string{
	refCreate, `{"type":"x"}`, `{}`, `[]`, `null`, `{"type":"x","context":null}`, `{"type":"x","context":{"a":[1,2,{"b":null}]}}`,
	`{"type":"a.b-c_d","estimated_duration_seconds":86400}`, `{"type":"x","estimated_duration_seconds":1e400}`,
	`{"type":"x","estimated_duration_seconds":-1}`, `{"type":"\u0000"}`, `{"type":"x","type":"y"}`, "{\"type\":\"x\"}\xff",
	`{"type":"x","context":"` + strings.Repeat("a", 100) + `"}`, `{"type":` + strings.Repeat("[", 5000),
	`{"type":"x","context":{"a":"` + "\xff\xfe" + `","n":1e309}}`, `{"TYPE":"x"}`, `{"\u0074ype":"x"}`,
	`{"type":"x","context":{"a":1,"\u0061":2}}`, `{"type":"x","context":{"s":"\ud800"}}`,
}

var completeSeeds = []string{
	`{"result_type":"answer","result":{"statement_id":"stmt","pages":14,"totals":{"income":"48211.09"}}}`,
	`{"result_type":"link","result":{"url":"https://f.example/x.pdf","expires_at":"2026-11-30T10:00:00Z","size_bytes":1,"content_type":"a/b"}}`,
	`{"result_type":"link","result":{"url":"https://f.example/x.pdf","expires_at":"2026-11-30T10:00:00+25:00"}}`,
	`{"result_type":"link","result":{"url":"http://[::1","expires_at":"x"}}`,
	`{"result_type":"confirmation","result":{"confirmed":false,"message":"ok"}}`,
	`{"result_type":"confirmation","result":{"confirmed":"yes"}}`, `{"result_type":null,"result":null}`,
	`{"result_type":"answer","result":[]}`, `{"result_type":"link","result":{"url":1}}`, `{"code":"ERR_X"}`,
	`{"percent":100,"message":"done"}`, `{"percent":-0}`, `{"reason":"\ud800"}`,
	`{"result_type":"answer","result":{"a":"` + "\xc3" + `","b":-1e400}}`, `{"result_type":"answer","result":{"k":1,"k":2}}`,
	`{"code":"E","reason":"` + "\x80" + `"}`, `{"Reason":"x"}`,
}

var webhookSeeds = []string{
	`{"url":"https://partner.example/hook"}`, `{"url":"https://partner.example:0/hook"}`, `{"url":"https://partner.example:99999/"}`,
	`{"url":"https://partner.example:/"}`, `{"url":"http://partner.example/"}`, `{"url":"https://sneaky.example/"}`,
	`{"url":"https://partner.example/","events":["request.failed","request.failed"]}`, `{"url":"https://partner.example/","events":[]}`,
	`{"url":"https://partner.example/","description":"` + "\xfe" + `"}`, `{"URL":"https://partner.example/"}`, `{"url":1}`, `[]`,
}

func FuzzCreateBody(f *testing.F) {
	for _, s := range createSeeds {
		f.Add(s, "", "application/json")
	}
	f.Add(`{"type":"x"}`, `"quoted"`, "application/merge-patch+json")
	f.Add(`{"type":"x"}`, "k", "text/plain; charset=utf-8")
	e := newEnv(f, nil)
	f.Fuzz(func(t *testing.T, body, idem, ctype string) {
		fuzzSend(t, e, "/v1/requests", body, idem, ctype)
	})
}

func FuzzTransitionBody(f *testing.F) {
	names := []string{"complete", "fail", "processing", "cancel"}
	for _, s := range completeSeeds {
		for i := range names {
			f.Add(uint8(i), s, "")
		}
	}
	e := newEnv(f, nil)
	f.Fuzz(func(t *testing.T, sel uint8, body, idem string) {
		tr := names[int(sel)%len(names)]
		// a fresh request each time, so that every body meets a non-terminal record
		id := fuzzCreate(t, e)
		fuzzSend(t, e, "/v1/requests/"+id+"/"+tr, body, idem, "application/json")
	})
}

// FuzzWebhookBody: the one body route outside /v1/requests (docs/reference.md §10).
func FuzzWebhookBody(f *testing.F) {
	for _, s := range webhookSeeds {
		f.Add(s, "")
	}
	e := webhookEnv(f)
	f.Fuzz(func(t *testing.T, body, idem string) {
		req := httptest.NewRequest("POST", "/v1/webhooks", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.keys["acme-admin"])
		req.Header.Set("Content-Type", "application/json")
		if idem != "" && !strings.ContainsAny(idem, "\r\n\x00") {
			req.Header.Set("Idempotency-Key", idem)
		}
		res, err := e.srv.App().Test(req, -1)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode >= 500 {
			t.Fatalf("POST /v1/webhooks %q answered %d: %s", body, res.StatusCode, b)
		}
		if res.StatusCode >= 400 && res.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("error answer %d is not problem+json", res.StatusCode)
		}
		mustBeJSON(t, "POST /v1/webhooks", body, b)
	})
}
