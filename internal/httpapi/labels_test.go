package httpapi_test

import (
	"net/url"
	"strings"
	"testing"
)

// TestCreateLabelsHTTP: labels (docs/reference.md §16) are validated with a
// 400 naming the field, answered in the representation (omitted without any),
// kept by polls and transitions, and part of the Idempotency-Key fingerprint.
func TestCreateLabelsHTTP(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct{ name, labels, field string }{
		{"NotObject", `["a"]`, "labels"},
		{"TooMany", `{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9"}`, "labels"},
		{"BadName", `{"Team":"x"}`, "labels.Team"},
		{"BadValue", `{"team":"a b"}`, "labels.team"},
		{"ValueNotString", `{"team":7}`, "labels.team"},
		{"ValueTooLong", `{"team":"` + strings.Repeat("v", 64) + `"}`, "labels.team"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := wantProblem(t, e.create("acme-rw", `{"type":"x","labels":`+c.labels+`}`), 400, "VALIDATION_FAILED")
			errs, _ := m["errors"].([]any)
			if len(errs) == 0 || errs[0].(map[string]any)["field"] != c.field {
				t.Fatalf("errors %v, want field %s", m["errors"], c.field)
			}
		})
	}
	for _, k := range e.m.Keys() {
		if strings.Contains(k, ":r:") {
			t.Fatalf("a refused create stored %s", k)
		}
	}

	body := `{"type":"x","labels":{"team":"billing","env":"prod"}}`
	r := e.create("acme-rw", body, "Idempotency-Key", "l1")
	if r.code != 202 || !strings.Contains(string(r.body), `"labels":{"env":"prod","team":"billing"}`) {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	id := r.json(t)["id"].(string)
	if p := e.call("GET", "/v1/requests/"+id, "", e.as("acme-r")...); p.code != 200 ||
		!strings.Contains(string(p.body), `"labels":{"env":"prod","team":"billing"}`) {
		t.Fatalf("poll: %d %s", p.code, p.body)
	}
	if c := e.call("POST", "/v1/requests/"+id+"/cancel", "", e.as("acme-rw")...); c.code != 200 ||
		!strings.Contains(string(c.body), `"labels":{"env":"prod","team":"billing"}`) {
		t.Fatalf("cancel: %d %s", c.code, c.body)
	}
	// the same labels in another order and spacing replay; other labels do not
	if again := e.create("acme-rw", `{"labels":{ "env":"prod", "team":"billing"},"type":"x"}`, "Idempotency-Key", "l1"); again.code != 202 || again.json(t)["id"] != id {
		t.Fatalf("replay: %d %s", again.code, again.body)
	}
	wantProblem(t, e.create("acme-rw", `{"type":"x","labels":{"env":"prod"}}`, "Idempotency-Key", "l1"), 422, "IDEMPOTENCY_KEY_REUSED")
	if plain := e.create("acme-rw", `{"type":"x"}`); plain.code != 202 || strings.Contains(string(plain.body), "labels") {
		t.Fatalf("unlabelled: %d %s", plain.code, plain.body)
	}
}

// TestListByLabelSelectorHTTP: label_selector filters the listing; a bad one
// answers 400 naming label_selector.
func TestListByLabelSelectorHTTP(t *testing.T) {
	e := newEnv(t, nil)
	var prod []string
	for i, env := range []string{"prod", "dev", "prod", "dev", "prod"} {
		r := e.create("acme-rw", `{"type":"x","labels":{"env":"`+env+`","n":"`+string(rune('0'+i))+`"}}`)
		if r.code != 202 {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
		if env == "prod" {
			prod = append([]string{r.json(t)["id"].(string)}, prod...)
		}
	}
	r := e.call("GET", "/v1/requests?label_selector=env%3Dprod&limit=2", "", e.as("acme-r")...)
	items, _ := r.json(t)["items"].([]any)
	if r.code != 200 || len(items) != 2 || items[0].(map[string]any)["id"] != prod[0] || items[1].(map[string]any)["id"] != prod[1] {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	next, _ := r.json(t)["next_cursor"].(string)
	if l := r.h.Get("Link"); !strings.Contains(l, "label_selector=env%3Dprod") || !strings.Contains(l, "cursor=") {
		t.Fatalf("Link %q does not keep the selector", l)
	}
	r = e.call("GET", "/v1/requests?label_selector=env=prod&limit=2&cursor="+next, "", e.as("acme-r")...)
	items, _ = r.json(t)["items"].([]any)
	if r.code != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != prod[2] || r.json(t)["next_cursor"] != nil {
		t.Fatalf("second page: %d %s", r.code, r.body)
	}
	r = e.call("GET", "/v1/requests?label_selector=env=prod,n=2", "", e.as("acme-r")...)
	if items, _ = r.json(t)["items"].([]any); r.code != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != prod[1] {
		t.Fatalf("two terms: %d %s", r.code, r.body)
	}
	for _, sel := range []string{"env", "env=", "=prod", "Env=prod", "env=prod,env=dev", "a=1,b=2,c=3,d=4,e=5", "env=-x"} {
		m := wantProblem(t, e.call("GET", "/v1/requests?label_selector="+url.QueryEscape(sel), "", e.as("acme-r")...), 400, "VALIDATION_FAILED")
		if errs, _ := m["errors"].([]any); len(errs) == 0 || errs[0].(map[string]any)["field"] != "label_selector" {
			t.Errorf("%s: %v", sel, m["errors"])
		}
	}
}

// TestLookupHTTP: ids= answers the visible ones, newest first, in one page;
// it takes no other parameter, and 1..100 ids.
func TestLookupHTTP(t *testing.T) {
	e := newEnv(t, nil)
	a, _ := e.mustCreate("acme-rw")
	b, _ := e.mustCreate("acme-rw")
	r := e.call("GET", "/v1/requests?ids="+a+",nope,"+b, "", e.as("acme-r")...)
	items, _ := r.json(t)["items"].([]any)
	if r.code != 200 || len(items) != 2 || items[0].(map[string]any)["id"] != b || items[1].(map[string]any)["id"] != a ||
		r.json(t)["next_cursor"] != nil {
		t.Fatalf("lookup: %d %s", r.code, r.body)
	}
	if r := e.call("GET", "/v1/requests?ids="+a, "", e.as("globex-rw")...); r.code != 200 || strings.Contains(string(r.body), a) {
		t.Fatalf("another tenant's lookup: %d %s", r.code, r.body)
	}
	many := strings.Repeat(a+",", 100) + a
	for _, q := range []string{"ids=", "ids=" + a + "&type=x", "ids=" + a + "&limit=5", "ids=" + a + "&cursor=x", many} {
		if !strings.HasPrefix(q, "ids=") {
			q = "ids=" + q
		}
		m := wantProblem(t, e.call("GET", "/v1/requests?"+q, "", e.as("acme-r")...), 400, "VALIDATION_FAILED")
		if errs, _ := m["errors"].([]any); len(errs) == 0 || errs[0].(map[string]any)["field"] != "ids" {
			t.Errorf("%.40s: %v", q, m["errors"])
		}
	}
}

// TestCountsHTTP: GET /v1/requests/counts answers every status, under type
// or one label term; bad queries answer 400 naming the parameter.
func TestCountsHTTP(t *testing.T) {
	e := newEnv(t, nil)
	for _, body := range []string{`{"type":"x","labels":{"env":"prod"}}`, `{"type":"x","labels":{"env":"dev"}}`, `{"type":"y","labels":{"env":"prod"}}`} {
		if r := e.create("acme-rw", body); r.code != 202 {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
	}
	for q, want := range map[string]string{
		"":                                    `{"queued":3,"processing":0,"succeeded":0,"failed":0,"cancelled":0,"expired":0}`,
		"?type=x":                             `{"queued":2,"processing":0,"succeeded":0,"failed":0,"cancelled":0,"expired":0}`,
		"?label_selector=env=prod":            `{"queued":2,"processing":0,"succeeded":0,"failed":0,"cancelled":0,"expired":0}`,
		"?created_after=2999-01-01T00:00:00Z": `{"queued":0,"processing":0,"succeeded":0,"failed":0,"cancelled":0,"expired":0}`,
	} {
		r := e.call("GET", "/v1/requests/counts"+q, "", e.as("acme-r")...)
		if r.code != 200 || string(r.body) != want {
			t.Errorf("%s: %d %s", q, r.code, r.body)
		}
	}
	for q, field := range map[string]string{"?status=queued": "status", "?label_selector=env=prod,team=a": "label_selector",
		"?type=x&label_selector=env=prod": "label_selector", "?type=X": "type", "?cursor=a": "cursor"} {
		m := wantProblem(t, e.call("GET", "/v1/requests/counts"+q, "", e.as("acme-r")...), 400, "VALIDATION_FAILED")
		if errs, _ := m["errors"].([]any); len(errs) == 0 || errs[0].(map[string]any)["field"] != field {
			t.Errorf("%s: %v", q, m["errors"])
		}
	}
	if r := e.call("GET", "/v1/requests/counts", "", e.as("globex-rw")...); r.code != 200 || !strings.Contains(string(r.body), `"queued":0`) {
		t.Fatalf("another tenant: %d %s", r.code, r.body)
	}
}
