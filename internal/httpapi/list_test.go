package httpapi_test

import (
	"context"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// list GETs one page and decodes it.
func (e *env) list(key, query string) (resp, []string, string) {
	e.t.Helper()
	r := e.call("GET", "/v1/requests"+query, "", e.as(key)...)
	if r.code != 200 {
		return r, nil, ""
	}
	m := r.json(e.t)
	var ids []string
	for _, it := range m["items"].([]any) {
		ids = append(ids, it.(map[string]any)["id"].(string))
	}
	next, _ := m["next_cursor"].(string)
	return r, ids, next
}

var linkPattern = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

func TestListHTTP(t *testing.T) {
	e := newEnv(t, nil)
	var all []string
	for range 7 {
		id, _ := e.mustCreate("acme-rw")
		all = append(all, id)
	}
	e.mustCreate("globex-rw")
	sort.Sort(sort.Reverse(sort.StringSlice(all))) // UUIDv7: newest first

	r, ids, next := e.list("acme-r", "")
	if !slices.Equal(ids, all) || next != "" || r.h.Get("Link") != "" || r.h.Get("Cache-Control") != "no-store" ||
		r.h.Get("Content-Type") != "application/json" {
		t.Fatalf("one page: %v next %q link %q headers %v", ids, next, r.h.Get("Link"), r.h)
	}
	m := r.json(t)
	if v, ok := m["next_cursor"]; !ok || v != nil {
		t.Fatalf("next_cursor must be null on the last page: %s", r.body)
	}
	item := m["items"].([]any)[0].(map[string]any)
	if item["poll_token"] != nil || item["status"] != "queued" || item["type"] != "statement.export" || item["version"] != 1.0 {
		t.Fatalf("item %v", item)
	}

	// Follow Link headers: absolute, same filters, and together the whole listing.
	var got []string
	path := "/v1/requests?limit=3&type=statement.export"
	for pages := 0; path != ""; pages++ {
		r := e.call("GET", path, "", append(e.as("acme-r"), "Host", "status.example:8443")...)
		if r.code != 200 || pages > 5 {
			t.Fatalf("page %d: %d %s", pages, r.code, r.body)
		}
		m := r.json(t)
		for _, it := range m["items"].([]any) {
			got = append(got, it.(map[string]any)["id"].(string))
		}
		path = ""
		if link := r.h.Get("Link"); link != "" {
			lm := linkPattern.FindStringSubmatch(link)
			if lm == nil {
				t.Fatalf("Link %q", link)
			}
			u, err := url.Parse(lm[1])
			if err != nil || u.Scheme != "http" || u.Host != "status.example:8443" || u.Path != "/v1/requests" ||
				u.Query().Get("type") != "statement.export" || u.Query().Get("limit") != "3" || u.Query().Get("cursor") != m["next_cursor"] {
				t.Fatalf("Link %q", link)
			}
			path = u.RequestURI()
		} else if m["next_cursor"] != nil {
			t.Fatal("next_cursor without Link")
		}
	}
	if !slices.Equal(got, all) {
		t.Fatalf("pages by Link: %v, want %v", got, all)
	}

	// filters
	for _, id := range all[:2] {
		if r := e.call("POST", "/v1/requests/"+id+"/cancel", "", e.as("acme-w")...); r.code != 200 {
			t.Fatal(r.code)
		}
	}
	if r := e.call("POST", "/v1/requests/"+all[2]+"/processing", "", e.as("acme-w")...); r.code != 200 {
		t.Fatal(r.code)
	}
	for q, want := range map[string][]string{
		"?status=cancelled":                    all[:2],
		"?status=cancelled,processing":         all[:3],
		"?status=processing&status=CANCELLED":  all[:3],
		"?status=queued&type=statement.export": all[3:],
		"?type=other":                          nil,
		"?status=%20queued%20,%20processing":   all[2:],
		"?limit=200&cursor=":                   all, // empty values count as absent
	} {
		if r, ids, _ := e.list("acme-r", q); r.code != 200 || !slices.Equal(ids, want) {
			t.Errorf("%s: %d %v, want %v: %s", q, r.code, ids, want, r.body)
		}
	}
	created := map[string]string{}
	for _, id := range all {
		created[id] = e.call("GET", "/v1/requests/"+id, "", e.as("acme-admin")...).json(t)["created_at"].(string)
	}
	lo, hi := created[all[4]], created[all[2]]
	var want []string
	for _, id := range all {
		if created[id] >= lo && created[id] <= hi { // same layout: string order is time order
			want = append(want, id)
		}
	}
	q := "?created_after=" + url.QueryEscape(lo) + "&created_before=" + url.QueryEscape(hi)
	if _, ids, _ := e.list("acme-r", q); !slices.Equal(ids, want) || !slices.Contains(ids, all[4]) || !slices.Contains(ids, all[2]) {
		t.Errorf("%s (inclusive): %v, want %v", q, ids, want)
	}
}

func TestListValidationHTTP(t *testing.T) {
	e := newEnv(t, nil)
	for q, field := range map[string]string{
		"?limit=0":                             "limit",
		"?limit=201":                           "limit",
		"?limit=ten":                           "limit",
		"?limit=2&limit=3":                     "limit",
		"?status=done":                         "status",
		"?status=queued,":                      "status",
		"?type=Not%20A%20Type":                 "type",
		"?created_after=yesterday":             "created_after",
		"?created_before=2026-13-01T00:00:00Z": "created_before",
		"?created_after=2026-02-01T00:00:00Z&created_before=2026-01-01T00:00:00Z": "created_before",
		"?stauts=failed": "stauts",
	} {
		m := wantProblem(t, e.call("GET", "/v1/requests"+q, "", e.as("acme-r")...), 400, "VALIDATION_FAILED")
		errs, _ := m["errors"].([]any)
		if len(errs) == 0 || errs[0].(map[string]any)["field"] != field {
			t.Errorf("%s: errors %v, want field %s", q, m["errors"], field)
		}
	}

	for range 3 {
		e.mustCreate("acme-rw")
	}
	_, _, next := e.list("acme-r", "?limit=1&status=queued")
	if next == "" {
		t.Fatal("no cursor")
	}
	for _, q := range []string{
		"?limit=1&cursor=" + next,                                     // without the status filter
		"?limit=1&status=queued,failed&cursor=" + next,                // other statuses
		"?limit=1&status=queued&type=x&cursor=" + next,                // another type
		"?limit=1&status=queued&cursor=" + next[:len(next)-3] + "abc", // garbled
		"?status=queued&cursor=%00%01",
	} {
		wantProblem(t, e.call("GET", "/v1/requests"+q, "", e.as("acme-r")...), 400, "INVALID_CURSOR")
	}
	if r, ids, _ := e.list("acme-r", "?limit=2&status=queued&cursor="+next); r.code != 200 || len(ids) != 2 {
		t.Fatalf("same filters, another limit: %d %s", r.code, r.body)
	}
	// the cursor is bound to the tenant too
	r := e.call("GET", "/v1/requests?limit=1&status=queued&cursor="+next, "", e.as("globex-rw")...)
	wantProblem(t, r, 400, "INVALID_CURSOR")
}

func TestListAccessHTTP(t *testing.T) {
	e := newEnv(t, nil)
	id, tok := e.mustCreate("acme-rw")
	wantProblem(t, e.call("GET", "/v1/requests", ""), 401, "UNAUTHENTICATED")
	wantProblem(t, e.call("GET", "/v1/requests", "", "X-Poll-Token", tok), 401, "UNAUTHENTICATED")
	wantProblem(t, e.call("GET", "/v1/requests", "", e.as("acme-w")...), 403, "FORBIDDEN")
	if err := e.st.SetFrozen(context.Background(), "acme", true); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, e.call("GET", "/v1/requests", "", e.as("acme-r")...), 403, "TENANT_FROZEN")
	if err := e.st.SetFrozen(context.Background(), "acme", false); err != nil {
		t.Fatal(err)
	}
	if _, ids, _ := e.list("acme-r", ""); !slices.Equal(ids, []string{id}) {
		t.Fatalf("after unfreeze: %v", ids)
	}
	// deleted and past-retention records never appear
	if r := e.call("DELETE", "/v1/requests/"+id, "", e.as("acme-admin")...); r.code != 204 {
		t.Fatal(r.code)
	}
	done, _ := e.mustCreate("acme-rw")
	if r := e.call("POST", "/v1/requests/"+done+"/cancel", "", e.as("acme-w")...); r.code != 200 {
		t.Fatal(r.code)
	}
	e.clock.Add(time.Hour) // the env's retention
	if r, ids, _ := e.list("acme-r", ""); r.code != 200 || len(ids) != 0 {
		t.Fatalf("gone records listed: %v", ids)
	}
}

func TestListPublicURLHTTP(t *testing.T) {
	e := newEnv(t, func(o *httpapi.Options) { o.PublicURL = "https://status.example.com/" })
	e.mustCreate("acme-rw")
	e.mustCreate("acme-rw")
	r, _, next := e.list("acme-r", "?limit=1&created_after=2020-01-01T00:00:00.5%2B01:00")
	link := r.h.Get("Link")
	if !strings.HasPrefix(link, "<https://status.example.com/v1/requests?") || !strings.Contains(link, "cursor="+next) ||
		!strings.Contains(link, "created_after=2019-12-31T23%3A00%3A00.5Z") {
		t.Fatalf("Link %q", link)
	}
}

// TestListRoundTrips: a page is two Redis round trips however long it is: the list
// script, then one read of the page's records.
func TestListRoundTrips(t *testing.T) {
	e := newEnv(t, nil)
	for range 60 {
		e.mustCreate("acme-rw")
	}
	c := &testenv.RoundTrips{}
	e.rdb.AddHook(c)
	e.list("acme-r", "?limit=1") // warms the key cache
	for _, q := range []string{"?limit=50", "?limit=200&type=statement.export", "?status=queued,failed&type=statement.export"} {
		before := c.Trips.Load()
		if r, ids, _ := e.list("acme-r", q); r.code != 200 || len(ids) < 50 {
			t.Fatalf("%s: %d %d items", q, r.code, len(ids))
		}
		if got := c.Trips.Load() - before; got != 2 {
			t.Fatalf("%s: %d Redis round trips, want 2", q, got)
		}
	}
}
