package console

import (
	"strconv"
	"strings"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// The requests page is written in Go, not by html/template: the template
// calls an escaper through reflection for every action, which was most of the
// page's own work (docs/reference.md §14: a page of 50 requests in about the time of one
// list call; BenchmarkRequestsPage). templates/requests.html with the layout
// stays its reference: TestRequestsPageIsTheTemplate renders both for many
// views, hostile values included, and wants the same bytes, so the escaping is
// html/template's and a change to the layout shows there.

// requestsData is what the requests page shows below the frame.
type requestsData struct {
	Summary domain.TenantSummary
	Now     time.Time
	Filter  filterValues
	Problem error             // the filter's or the listing's refusal, shown above the table
	Items   []*domain.Request // nil when Problem is set
	Next    string            // the next page's query; "" on the last page
}

// appendRequestsPage appends the whole page: the layout's frame around the
// requests content, as templates/layout.html and requests.html write them.
func appendRequestsPage(b []byte, v *view, d *requestsData) []byte {
	b = append(b, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"+
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"...)
	b = appendEscaped(b, v.Title)
	b = append(b, " · asyncstatus console</title>\n<link rel=\"stylesheet\" href=\"/assets/console.css\">\n"+
		"<script src=\"/assets/console.js\" defer></script>"...)
	if v.Live != "" {
		b = append(b, "\n<noscript><meta http-equiv=\"refresh\" content=\"5\"></noscript>"...)
	}
	b = append(b, "\n</head>\n<body"...)
	if v.Live != "" {
		b = append(b, ` data-live="`...)
		b = appendEscaped(b, v.Live)
		b = append(b, '"')
	}
	b = append(b, ">\n<header class=\"top\">\n  <a class=\"brand\" href=\"/\">asyncstatus <span>console</span></a>"...)
	if c := v.Session; c != nil {
		if c.Operator {
			b = append(b, "\n  <nav aria-label=\"Service\">"...)
			b = appendNav(b, "\n    ", "", v.Nav, []navEntry{
				{"tenants", "Tenants"}, {"figures", "Figures"}, {"config", "Configuration"}, {"operator-keys", "Operator keys"}})
			b = append(b, "\n  </nav>"...)
		}
		b = append(b, "\n  <span class=\"who\">"...)
		if c.Operator {
			b = append(b, "operator"...)
		} else {
			b = append(b, "tenant "...)
			b = appendEscaped(b, c.Tenant)
		}
		b = append(b, " · "...)
		b = appendEscaped(b, c.KeyID)
		b = append(b, "</span>\n  <form method=\"post\" action=\"/signout\" class=\"inline\">\n"+
			"    <input type=\"hidden\" name=\"csrf\" value=\""...)
		b = appendEscaped(b, v.CSRF)
		b = append(b, "\">\n    <button type=\"submit\">Sign out</button>\n  </form>"...)
	}
	b = append(b, "\n</header>"...)
	if v.Tenant != "" && v.Session != nil {
		b = append(b, "\n<nav class=\"tenant\" aria-label=\"Tenant\">\n  <strong>"...)
		b = appendEscaped(b, v.Tenant)
		b = append(b, "</strong>"...)
		b = appendNav(b, "\n  ", v.Tenant, v.Nav, []navEntry{
			{"requests", "Requests"}, {"webhooks", "Webhooks"}, {"keys", "API keys"}})
		b = append(b, "\n</nav>"...)
	}
	b = append(b, "\n<main>\n<h1>"...)
	b = appendEscaped(b, v.Title)
	b = append(b, "</h1>\n"...)
	b = appendRequestsContent(b, v, d)
	return append(b, "\n</main>\n</body>\n</html>\n"...)
}

// navEntry is a link of the navigation: its path below the base and its label.
type navEntry struct{ nav, label string }

// appendNav appends the links of entries, each on a line of its own after
// indent, below "/" (or "/t/tenant/" when tenant is set); the active one is
// marked as the current page.
func appendNav(b []byte, indent, tenant, active string, entries []navEntry) []byte {
	for _, n := range entries {
		b = append(b, indent...)
		b = append(b, `<a href="/`...)
		if tenant != "" {
			b = append(b, "t/"...)
			b = appendURLPart(b, tenant)
			b = append(b, '/')
		}
		b = append(b, n.nav...)
		b = append(b, '"')
		if n.nav == active {
			b = append(b, ` aria-current="page"`...)
		}
		b = append(b, '>')
		b = append(b, n.label...)
		b = append(b, "</a>"...)
	}
	return b
}

// appendRequestsContent is templates/requests.html's "content".
func appendRequestsContent(b []byte, v *view, d *requestsData) []byte {
	s := &d.Summary
	b = append(b, "\n\n<section class=\"summary\" aria-label=\"Counts\">\n  <ul class=\"counts\">\n    "...)
	b = appendCounts(b, s)
	b = append(b, "\n  </ul>\n  <p>Oldest queued: <strong>"...)
	b = appendEscaped(b, age(d.Now, s.OldestQueued))
	b = append(b, "</strong> · oldest processing: <strong>"...)
	b = appendEscaped(b, age(d.Now, s.OldestProcessing))
	b = append(b, "</strong>\n  "...)
	if s.Frozen {
		b = append(b, ` · <span class="st st-frozen">frozen</span>`...)
	}
	b = append(b, "</p>\n  "...)
	if v.Session.Operator {
		action := "freeze\" class=\"inline\"><button type=\"submit\">Freeze tenant</button></form>\n  "
		if s.Frozen {
			action = "unfreeze\" class=\"inline\"><button type=\"submit\">Unfreeze tenant</button></form>\n    \n  "
		}
		b = append(b, "\n    <form method=\"get\" action=\"/t/"...)
		b = appendURLPart(b, v.Tenant)
		b = append(b, '/')
		b = append(b, action...)
	}
	f := &d.Filter
	b = append(b, "\n</section>\n\n<form method=\"get\" class=\"filters\" aria-label=\"Filters\">\n"+
		"  <label>type <input name=\"type\" value=\""...)
	b = appendEscaped(b, f.Type)
	b = append(b, "\" size=\"16\"></label>\n  <fieldset><legend>status</legend>\n  "...)
	b = appendStatusBoxes(b, f)
	b = append(b, "\n  </fieldset>\n  <label>labels <input name=\"label_selector\" value=\""...)
	b = appendEscaped(b, f.LabelSelector)
	b = append(b, "\" placeholder=\"env=prod,team=a\" size=\"22\"></label>\n  <label>created after <input name=\"created_after\" value=\""...)
	b = appendEscaped(b, f.CreatedAfter)
	b = append(b, "\" placeholder=\"2026-12-01T00:00:00Z\" size=\"22\"></label>\n"+
		"  <label>created before <input name=\"created_before\" value=\""...)
	b = appendEscaped(b, f.CreatedBefore)
	b = append(b, "\" placeholder=\"2026-12-01T23:59:59Z\" size=\"22\"></label>\n"+
		"  <label>per page <input name=\"limit\" value=\""...)
	b = appendEscaped(b, f.Limit)
	b = append(b, "\" placeholder=\"50\" size=\"4\"></label>\n  <button type=\"submit\">Filter</button>\n</form>\n"...)
	if d.Problem != nil {
		b = append(b, `<p class="problem" role="alert">`...)
		b = appendEscaped(b, d.Problem.Error())
		b = append(b, "</p>"...)
	}
	b = append(b, '\n')
	switch {
	case len(d.Items) > 0:
		b = append(b, "\n<table class=\"requests\">\n<thead><tr><th scope=\"col\">Request</th><th scope=\"col\">type</th>"+
			"<th scope=\"col\">status</th><th scope=\"col\">created</th><th scope=\"col\">updated</th><th scope=\"col\">by</th>"+
			"</tr></thead>\n<tbody>\n"...)
		b = appendRows(b, v.Tenant, d.Items)
		b = append(b, "</tbody>\n</table>\n"...)
	case d.Problem == nil:
		b = append(b, "<p>No request matches.</p>"...)
	}
	b = append(b, '\n')
	if d.Next != "" {
		b = append(b, `<p><a rel="next" href="`...)
		b = appendURL(b, d.Next)
		b = append(b, `">Next page</a></p>`...)
	}
	return append(b, '\n')
}

// appendRows appends the rows of the requests table, every value escaped.
func appendRows(b []byte, tenant string, items []*domain.Request) []byte {
	for _, r := range items {
		b = append(b, `<tr data-id="`...)
		b = appendEscaped(b, r.ID)
		b = append(b, "\">\n  <td><a class=\"mono\" href=\"/t/"...)
		b = appendURLPart(b, tenant)
		b = append(b, "/requests/"...)
		b = appendURLPart(b, r.ID)
		b = append(b, `">`...)
		b = appendEscaped(b, r.ID)
		b = append(b, "</a></td>\n  <td>"...)
		b = appendEscaped(b, r.Type)
		b = append(b, "</td>\n  <td>"...)
		b = appendStatus(b, r.Status)
		b = append(b, "</td>\n  <td>"...)
		b = appendTime(b, r.CreatedAt.Time)
		b = append(b, "</td>\n  <td>"...)
		b = appendTime(b, r.UpdatedAt.Time)
		b = append(b, "</td>\n  <td class=\"mono\">"...)
		b = appendEscaped(b, r.CreatedBy)
		b = append(b, "</td>\n</tr>\n"...)
	}
	return b
}

// appendTime is timeTag for a time that may be zero (then nothing).
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	return appendTimeTag(b, t)
}

// appendCounts appends the list items of the counts by status, and
// appendStatusBoxes the status checkboxes of the filter form. Status words are
// [a-z] only.
func appendCounts(b []byte, sum *domain.TenantSummary) []byte {
	for _, st := range domain.Statuses {
		b = append(b, "<li>"...)
		b = appendStatus(b, st)
		b = append(b, " <strong>"...)
		b = strconv.AppendInt(b, sum.Counts[st], 10)
		b = append(b, "</strong></li>"...)
	}
	return b
}

func appendStatusBoxes(b []byte, fv *filterValues) []byte {
	for _, st := range domain.Statuses {
		b = append(b, `<label><input type="checkbox" name="status" value="`...)
		b = append(b, st...)
		b = append(b, '"')
		if fv.Status[st] {
			b = append(b, " checked"...)
		}
		b = append(b, "> "...)
		b = append(b, st...)
		b = append(b, "</label>"...)
	}
	return b
}

// appendStatus is statusTag.
func appendStatus(b []byte, s domain.Status) []byte {
	if !s.Valid() {
		return appendEscaped(b, string(s))
	}
	b = append(b, `<span class="st st-`...)
	b = append(b, s...)
	b = append(b, `">`...)
	b = append(b, s...)
	return append(b, "</span>"...)
}

// escapes is html/template's replacement table for text, quoted attribute
// values and RCDATA (html.go, htmlReplacementTable): byte by byte it gives
// what html/template writes, as every byte of a multi-byte UTF-8 sequence (or
// of an invalid one) is past the table and copied.
var escapes = [...]string{
	0:    "\uFFFD",
	'"':  "&#34;",
	'&':  "&amp;",
	'\'': "&#39;",
	'+':  "&#43;",
	'<':  "&lt;",
	'>':  "&gt;",
}

// appendEscaped appends s escaped for HTML text or a quoted attribute value.
func appendEscaped(b []byte, s string) []byte {
	done := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; int(c) < len(escapes) && escapes[c] != "" {
			b = append(b, s[done:i]...)
			b = append(b, escapes[c]...)
			done = i + 1
		}
	}
	return append(b, s[done:]...)
}

// appendURL appends s as html/template writes the whole value of a quoted URL
// attribute: a scheme other than http, https or mailto is refused
// ("#ZgotmplZ"), and the rest is appendURLPart.
func appendURL(b []byte, s string) []byte {
	if scheme, _, ok := strings.Cut(s, ":"); ok && !strings.Contains(scheme, "/") &&
		!strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") && !strings.EqualFold(scheme, "mailto") {
		return append(b, "#ZgotmplZ"...)
	}
	return appendURLPart(b, s)
}

// appendURLPart appends s as html/template writes a value inside the path of
// a quoted URL attribute: what a URL may not hold is percent-encoded (valid
// escapes stay), then & and + are escaped for the attribute.
func appendURLPart(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	done := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			continue
		case c == '!' || c == '#' || c == '$' || c == '*' || c == ',' || c == '/' || c == ':' ||
			c == ';' || c == '=' || c == '?' || c == '@' || c == '[' || c == ']' ||
			c == '-' || c == '.' || c == '_' || c == '~':
			continue
		case c == '&' || c == '+':
			b = append(b, s[done:i]...)
			b = append(b, escapes[c]...)
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			continue
		default:
			b = append(b, s[done:i]...)
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
		done = i + 1
	}
	return append(b, s[done:]...)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
