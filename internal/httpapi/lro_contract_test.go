package httpapi_test

import (
	"strings"
	"testing"
	"time"
)

// wantGoogleError checks an AIP-193 error answer (docs/reference.md §15):
// application/json, the HTTP status in error.code, a google.rpc status name,
// and an ErrorInfo whose reason is the §7 code.
func wantGoogleError(t testing.TB, r resp, status int, code string) map[string]any {
	t.Helper()
	if r.code != status {
		t.Fatalf("status %d, want %d: %s", r.code, status, r.body)
	}
	if ct := r.h.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q: %s", ct, r.body)
	}
	e, _ := r.json(t)["error"].(map[string]any)
	details, _ := e["details"].([]any)
	if e == nil || e["code"] != float64(status) || e["status"] == "" || e["message"] == "" || len(details) == 0 {
		t.Fatalf("error %s, want status %d", r.body, status)
	}
	info, _ := details[0].(map[string]any)
	if info["@type"] != "type.googleapis.com/google.rpc.ErrorInfo" || info["reason"] != code || info["domain"] != "asyncstatus" {
		t.Fatalf("details %s, want an ErrorInfo with reason %s", r.body, code)
	}
	return e
}

// googleRoute reports whether path is one of the Operations routes, whose
// errors are AIP-193 errors.
func googleRoute(path string) bool {
	return path == "/v1/operations" || strings.HasPrefix(path, "/v1/operations/") || strings.HasPrefix(path, "/v1/operations?")
}

// lroExchanges is one valid call of every §15 operation, for the rate-limited
// and Redis-down rounds of the contract.
func lroExchanges(id, tok string, rw, admin []string) []exchange {
	o := "/v1/operations/" + id
	return []exchange{
		{name: "status monitor", method: "GET", path: "/v1/requests/" + id + "/operation", hdr: rw},
		{name: "status monitor by token", method: "GET", path: "/v1/requests/" + id + "/operation", hdr: []string{"X-Poll-Token", tok}},
		{name: "get operation", method: "GET", path: o, hdr: rw},
		{name: "list operations", method: "GET", path: "/v1/operations", hdr: rw},
		{name: "cancel operation", method: "POST", path: o + ":cancel", hdr: rw},
		{name: "wait operation", method: "POST", path: o + ":wait", body: `{"timeout":"1s"}`, hdr: rw},
		{name: "delete operation", method: "DELETE", path: o, hdr: admin},
	}
}

// contractLRORoutes drives the status monitor and every Google Operations
// route, success and error answers.
func contractLRORoutes(t *testing.T, k *contract, e *env, r, w, rw, admin []string) {
	t.Helper()
	with := func(a []string, b ...string) []string { return append(append([]string{}, a...), b...) }
	tokHdr := func(tok string) []string { return []string{"X-Poll-Token", tok} }

	// status monitor
	id, tok := e.mustCreate("acme-rw")
	m := "/v1/requests/" + id + "/operation"
	if got := k.check(t, e, exchange{name: "monitor", method: "GET", path: m, hdr: r, want: 200}).json(t); got["status"] != "NotStarted" || got["id"] != id {
		t.Errorf("monitor of a queued request: %v", got)
	}
	k.check(t, e, exchange{name: "monitor too early", method: "GET", path: m, hdr: r, want: 429, code: "POLLED_TOO_EARLY"})
	e.clock.Add(time.Second)
	k.check(t, e, exchange{name: "monitor not modified", method: "GET", path: m, hdr: with(r, "If-None-Match", `"1"`), want: 304})
	k.check(t, e, exchange{name: "monitor by token", method: "GET", path: m, hdr: tokHdr(tok), want: 200})
	k.check(t, e, exchange{name: "monitor no credential", method: "GET", path: m, want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "monitor write-only key", method: "GET", path: m, hdr: w, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "monitor unknown", method: "GET", path: "/v1/requests/" + unknownID + "/operation", hdr: r, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "monitor wrong token", method: "GET", path: m, hdr: tokHdr(tok + "x"), want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "monitor oversized header", method: "GET", path: m, hdr: with(r, bigHeader...), want: 400, code: "VALIDATION_FAILED", network: true})
	lp := k.check(t, e, exchange{name: "monitor long poll", method: "GET", path: m, hdr: with(r, "Prefer", "wait=1"), want: 200, network: true})
	if lp.h.Get("Preference-Applied") != "wait=1" || lp.h.Get("Retry-After") != "0" || !strings.Contains(string(lp.body), `"status":"NotStarted"`) {
		t.Errorf("monitor long poll: %v %s", lp.h, lp.body)
	}
	if c := e.call("POST", "/v1/requests/"+id+"/processing", `{"percent":40}`, w...); c.code != 200 {
		t.Fatal(c.code)
	}
	e.clock.Add(time.Minute)
	if got := k.check(t, e, exchange{name: "monitor running", method: "GET", path: m, hdr: r, want: 200}).json(t); got["status"] != "Running" || got["percentComplete"] != float64(40) {
		t.Errorf("monitor of a processing request: %v", got)
	}
	for _, end := range []struct{ path, body, status, code string }{
		{"/complete", `{"result_type":"answer","result":{"ok":true}}`, "Succeeded", ""},
		{"/fail", `{"code":"ERR_UPSTREAM","reason":"ledger down"}`, "Failed", "ERR_UPSTREAM"},
		{"/cancel", `{"reason":"not needed"}`, "Canceled", "CANCELLED"},
	} {
		eid, _ := e.mustCreate("acme-rw")
		if c := e.call("POST", "/v1/requests/"+eid+end.path, end.body, w...); c.code != 200 {
			t.Fatal(c.code)
		}
		got := k.check(t, e, exchange{name: "monitor " + end.status, method: "GET", path: "/v1/requests/" + eid + "/operation", hdr: r, want: 200})
		body := got.json(t)
		if body["status"] != end.status || got.h.Get("Retry-After") != "" {
			t.Errorf("monitor %s: %v %s", end.status, got.h, got.body)
		}
		if end.code == "" && body["resourceLocation"] != "http://example.com/v1/requests/"+eid {
			t.Errorf("monitor %s: resourceLocation %v", end.status, body["resourceLocation"])
		}
		if errObj, _ := body["error"].(map[string]any); end.code != "" && (errObj == nil || errObj["code"] != end.code) {
			t.Errorf("monitor %s: %s", end.status, got.body)
		}
	}

	// Google: get
	gid, gtok := e.mustCreate("acme-rw")
	o := "/v1/operations/" + gid
	if got := k.check(t, e, exchange{name: "get operation", method: "GET", path: o + "?$alt=json;enum-encoding=int&$prettyPrint=false", hdr: r, want: 200}).json(t); got["done"] != false || got["name"] != "operations/"+gid {
		t.Errorf("operation of a queued request: %v", got)
	}
	k.check(t, e, exchange{name: "get operation too early", method: "GET", path: o, hdr: r, want: 429, code: "POLLED_TOO_EARLY"})
	e.clock.Add(time.Second)
	k.check(t, e, exchange{name: "get operation not modified", method: "GET", path: o, hdr: with(r, "If-None-Match", `"1"`), want: 304})
	k.check(t, e, exchange{name: "get operation by token", method: "GET", path: o, hdr: tokHdr(gtok), want: 200})
	k.check(t, e, exchange{name: "get operation no credential", method: "GET", path: o, want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "get operation write-only key", method: "GET", path: o, hdr: w, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "get operation unknown", method: "GET", path: "/v1/operations/" + unknownID, hdr: r, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "get operation malformed", method: "GET", path: "/v1/operations/nope", hdr: r, want: 404, code: "NOT_FOUND", invalid: true})
	k.check(t, e, exchange{name: "get operation wrong token", method: "GET", path: o, hdr: tokHdr(gtok + "x"), want: 404, code: "NOT_FOUND"})
	glp := k.check(t, e, exchange{name: "get operation long poll", method: "GET", path: o, hdr: with(r, "Prefer", "wait=1"), want: 200, network: true})
	if glp.h.Get("Preference-Applied") != "wait=1" || !strings.Contains(string(glp.body), `"done":false`) {
		t.Errorf("operation long poll: %v %s", glp.h, glp.body)
	}

	// Google: list
	k.check(t, e, exchange{name: "list operations", method: "GET", path: "/v1/operations?$alt=json", hdr: r, want: 200})
	page := k.check(t, e, exchange{name: "list operations page", method: "GET",
		path: `/v1/operations?pageSize=1&filter=done%20%3D%20false%20AND%20metadata.type%20%3D%20%22statement.export%22`, hdr: r, want: 200}).json(t)
	next, _ := page["nextPageToken"].(string)
	if ops, _ := page["operations"].([]any); len(ops) != 1 || next == "" {
		t.Fatalf("first page: %v", page)
	}
	k.check(t, e, exchange{name: "list operations next page", method: "GET",
		path: `/v1/operations?pageSize=1&filter=done%20%3D%20false%20AND%20metadata.type%20%3D%20%22statement.export%22&pageToken=` + next, hdr: r, want: 200})
	k.check(t, e, exchange{name: "list operations contradiction", method: "GET", path: `/v1/operations?filter=done=true%20AND%20metadata.status=queued`, hdr: r, want: 200})
	k.check(t, e, exchange{name: "list operations big page", method: "GET", path: "/v1/operations?pageSize=100000", hdr: r, want: 200})
	k.check(t, e, exchange{name: "list operations bad filter", method: "GET", path: "/v1/operations?filter=colour%3Dred", hdr: r, want: 400, code: "VALIDATION_FAILED"})
	k.check(t, e, exchange{name: "list operations page size 0", method: "GET", path: "/v1/operations?pageSize=0", hdr: r, want: 400, code: "VALIDATION_FAILED", invalid: true})
	k.check(t, e, exchange{name: "list operations garbled token", method: "GET", path: "/v1/operations?pageToken=garbled", hdr: r, want: 400, code: "INVALID_CURSOR"})
	k.check(t, e, exchange{name: "list operations no credential", method: "GET", path: "/v1/operations", want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "list operations by poll token", method: "GET", path: "/v1/operations", hdr: tokHdr(gtok), want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "list operations write-only key", method: "GET", path: "/v1/operations", hdr: w, want: 403, code: "FORBIDDEN"})

	// Google: wait
	k.check(t, e, exchange{name: "wait operation", method: "POST", path: o + ":wait", body: `{"timeout":"1s"}`, hdr: r, want: 200, network: true})
	k.check(t, e, exchange{name: "wait operation by token, no body", method: "POST", path: o + ":wait?$alt=json", hdr: tokHdr(gtok), want: 200, network: true})
	k.check(t, e, exchange{name: "wait operation named", method: "POST", path: o + ":wait", body: `{"name":"operations/` + gid + `","timeout":"0.5s"}`, hdr: r, want: 200, network: true})
	k.check(t, e, exchange{name: "wait operation bad timeout", method: "POST", path: o + ":wait", body: `{"timeout":"soon"}`, hdr: r, want: 400, code: "VALIDATION_FAILED", invalid: true})
	k.check(t, e, exchange{name: "wait operation other name", method: "POST", path: o + ":wait", body: `{"name":"operations/` + unknownID + `"}`, hdr: r, want: 400, code: "VALIDATION_FAILED"})
	k.check(t, e, exchange{name: "wait operation no credential", method: "POST", path: o + ":wait", want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "wait operation write-only key", method: "POST", path: o + ":wait", hdr: w, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "wait operation unknown", method: "POST", path: "/v1/operations/" + unknownID + ":wait", hdr: r, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "wait operation text/plain", method: "POST", path: o + ":wait", body: `{}`, hdr: with(r, "Content-Type", "text/plain"),
		want: 415, code: "UNSUPPORTED_MEDIA_TYPE", invalid: true})
	k.check(t, e, exchange{name: "wait operation too large", method: "POST", path: o + ":wait", body: `{"name":"` + strings.Repeat("n", 70<<10) + `"}`, hdr: r,
		want: 413, code: "PAYLOAD_TOO_LARGE", network: true})

	// Google: cancel
	k.check(t, e, exchange{name: "cancel operation bad body", method: "POST", path: o + ":cancel", body: `{"reason":"x"}`, hdr: w, want: 400, code: "VALIDATION_FAILED", invalid: true})
	k.check(t, e, exchange{name: "cancel operation other name", method: "POST", path: o + ":cancel", body: `{"name":"operations/x"}`, hdr: w, want: 400, code: "VALIDATION_FAILED"})
	k.check(t, e, exchange{name: "cancel operation text/plain", method: "POST", path: o + ":cancel", body: `{}`, hdr: with(w, "Content-Type", "text/plain"),
		want: 415, code: "UNSUPPORTED_MEDIA_TYPE", invalid: true})
	k.check(t, e, exchange{name: "cancel operation too large", method: "POST", path: o + ":cancel", body: `{"name":"` + strings.Repeat("n", 70<<10) + `"}`, hdr: w,
		want: 413, code: "PAYLOAD_TOO_LARGE", network: true})
	k.check(t, e, exchange{name: "cancel operation no credential", method: "POST", path: o + ":cancel", want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "cancel operation read key", method: "POST", path: o + ":cancel", hdr: r, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "cancel operation unknown", method: "POST", path: "/v1/operations/" + unknownID + ":cancel", hdr: w, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "cancel operation", method: "POST", path: o + ":cancel", body: `{"name":"operations/` + gid + `"}`, hdr: w, want: 200})
	k.check(t, e, exchange{name: "cancel operation again", method: "POST", path: o + ":cancel", hdr: w, want: 200})
	k.check(t, e, exchange{name: "wait operation done", method: "POST", path: o + ":wait", hdr: r, want: 200})
	done, _ := e.mustCreate("acme-rw")
	if c := e.call("POST", "/v1/requests/"+done+"/complete", `{"result_type":"answer","result":{}}`, w...); c.code != 200 {
		t.Fatal(c.code)
	}
	ge := wantGoogleError(t, k.check(t, e, exchange{name: "cancel operation succeeded", method: "POST", path: "/v1/operations/" + done + ":cancel", hdr: w,
		want: 400, code: "ASYNC_REQUEST_ALREADY_TERMINAL"}), 400, "ASYNC_REQUEST_ALREADY_TERMINAL")
	if ge["status"] != "FAILED_PRECONDITION" {
		t.Errorf("cancel of a succeeded operation: %v", ge)
	}
	if got := k.check(t, e, exchange{name: "get operation succeeded", method: "GET", path: "/v1/operations/" + done, hdr: r, want: 200}).json(t); got["response"] == nil || got["error"] != nil {
		t.Errorf("operation of a succeeded request: %v", got)
	}

	// Google: delete
	k.check(t, e, exchange{name: "delete operation no credential", method: "DELETE", path: o, want: 401, code: "UNAUTHENTICATED", invalid: true})
	k.check(t, e, exchange{name: "delete operation rw key", method: "DELETE", path: o, hdr: rw, want: 403, code: "FORBIDDEN"})
	k.check(t, e, exchange{name: "delete operation", method: "DELETE", path: o + "?$alt=json", hdr: admin, want: 200})
	k.check(t, e, exchange{name: "delete operation again", method: "DELETE", path: o, hdr: admin, want: 404, code: "NOT_FOUND"})
	k.check(t, e, exchange{name: "get deleted operation", method: "GET", path: o, hdr: r, want: 404, code: "NOT_FOUND"})
}
