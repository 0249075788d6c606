package console

import (
	"errors"
	"fmt"
	"html/template"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// TestRequestsPageIsTheTemplate: the requests page written in Go is, byte for
// byte, what templates/layout.html and requests.html write for the same view,
// for an operator and a tenant admin, a frozen tenant, a refusal, no rows and
// rows, and values that need escaping in text, attributes and URLs (so its
// escaping is html/template's).
func TestRequestsPageIsTheTemplate(t *testing.T) {
	s, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hostile := []string{"", "plain", `"><script>alert(1)</script>`, "a+b&c'd<e>", "nul\x00x", "\xff\xfe bad utf-8",
		"é€ unicode", "javascript:alert(1)", "sp ace%41%zz%", "\uFFFD"}
	now := time.Date(2026, 12, 2, 3, 4, 5, 678_000_000, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	items := func(n int) []*domain.Request {
		var out []*domain.Request
		for i := range n {
			h := hostile[i%len(hostile)]
			out = append(out, &domain.Request{ID: fmt.Sprintf("0193a%03d-%s", i, h), Type: "type " + h, CreatedBy: "key_" + h,
				Status:    domain.Statuses[i%len(domain.Statuses)],
				CreatedAt: domain.Time{Time: now.Add(-time.Duration(i) * time.Hour)}, UpdatedAt: domain.Time{Time: now.Add(time.Duration(i) * time.Millisecond)}})
		}
		if n > 2 {
			out[1].Status, out[2].UpdatedAt = domain.Status("bogus+<status>"), domain.Time{}
		}
		return out
	}
	sessions := []*current{
		{ConsoleSession: domain.ConsoleSession{KeyID: "key_op", Operator: true}},
		{ConsoleSession: domain.ConsoleSession{KeyID: "key_<admin>", Tenant: "acme"}},
	}
	n := 0
	for si, sess := range sessions {
		for hi, h := range hostile {
			for variant := range 4 {
				tenant := []string{"acme", "a_b-9"}[hi%2]
				v := &view{Session: sess, CSRF: "csrf" + h, Title: "Requests of " + tenant, Tenant: tenant, Nav: "requests"}
				if variant == 3 {
					v.Live = "/t/" + h + "/live"
				}
				d := &requestsData{Now: now, Filter: filterValues{Type: h, CreatedAfter: h + "1", CreatedBefore: "2" + h, Limit: h, LabelSelector: "l" + h,
					Status: map[domain.Status]bool{domain.Statuses[hi%6]: true, domain.Status(h): true}},
					Summary: domain.TenantSummary{Tenant: tenant, Frozen: variant == 1, Counts: map[domain.Status]int64{
						domain.StatusQueued: int64(hi * 1000), domain.StatusFailed: 7}}}
				switch variant {
				case 0:
					d.Summary.OldestQueued, d.Summary.OldestProcessing = at(3*time.Minute), at(50*time.Hour)
					d.Items, d.Next = items(12), "?type="+h+"&limit=50&cursor=AbC-_"
				case 1:
					d.Problem = errors.New("The tenant " + h + " is frozen.")
				case 2:
					d.Items = []*domain.Request{} // a page without rows
				case 3:
					d.Items, d.Next = items(3), h
				}
				var want strings.Builder
				v.Data = templateData(d)
				if err := s.pages["requests"].ExecuteTemplate(&want, "layout.html", v); err != nil {
					t.Fatal(err)
				}
				got := string(appendRequestsPage(nil, v, d))
				if got != want.String() {
					t.Fatalf("session %d, value %q, variant %d: the page differs from the template at byte %d:\n"+
						"got:  %q\nwant: %q", si, h, variant, firstDiff(got, want.String()),
						around(got, firstDiff(got, want.String())), around(want.String(), firstDiff(got, want.String())))
				}
				n++
			}
		}
	}
	t.Logf("%d views alike", n)
}

// templateData is what requests.html reads of d.
func templateData(d *requestsData) map[string]any {
	m := map[string]any{"Summary": d.Summary, "Now": d.Now, "Filter": d.Filter, "Items": d.Items, "Next": d.Next}
	if d.Problem != nil {
		m["Problem"] = d.Problem
	}
	return m
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func around(s string, i int) string { return s[max(0, i-80):min(len(s), i+80)] }

// TestTimeTag: the digits written by hand are AppendFormat's, for times
// across the years (and zones) a record can hold.
func TestTimeTag(t *testing.T) {
	slow := func(u time.Time) string {
		u = u.UTC()
		iso := u.Format(domain.TimeLayout)
		return `<time datetime="` + iso + `" title="` + iso + `">` + u.Format("2006-01-02 15:04:05 UTC") + "</time>"
	}
	r := rand.New(rand.NewPCG(1, 2))
	east := time.FixedZone("east", 5*3600+30*60)
	times := []time.Time{time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 0, 0, 0, 0, east)}
	for range 2000 {
		times = append(times, time.UnixMilli(r.Int64N(400_000_000_000_000)-30_000_000_000_000).In(east))
	}
	for _, tm := range times {
		if got, want := string(appendTimeTag(nil, tm)), slow(tm); got != want {
			t.Fatalf("%v: %s, want %s", tm, got, want)
		}
	}
	if got := timeTag(time.Time{}); got != template.HTML("") {
		t.Fatalf("zero time: %q", got)
	}
}
