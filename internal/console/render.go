package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// view is what every page template receives.
type view struct {
	Session *current
	CSRF    string // the session's CSRF token (the sign-in form's own token there)
	Title   string
	Tenant  string // the tenant the page is about, "" for service-wide pages
	Nav     string // the active navigation entry
	Data    any
	// Live, when set, is the URL of the page's live stream (request, figures).
	Live string
	// check, when set, is the session read the page may make itself (ahead).
	check *sessionCheck
}

// parsePages parses each page with the layout: templates/layout.html defines
// the frame, every other file defines "content" (and may define fragments).
func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: parse layout: %w", err)
	}
	files, err := templateFS.ReadDir("templates")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, f := range files {
		if f.Name() == "layout.html" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, "templates/"+f.Name())
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", f.Name(), err)
		}
		pages[strings.TrimSuffix(f.Name(), path.Ext(f.Name()))] = t
	}
	return pages, nil
}

// render writes a whole page. It renders into a buffer first, so that a
// template error is a clean 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, v *view) {
	var b bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&b, "layout.html", v); err != nil {
		s.log.Error("console: render", "page", page, "err", err)
		http.Error(w, "Internal error.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fragment renders one named template of a page (a live view's part).
func (s *Server) fragment(page, name string, v *view) (string, error) {
	var b bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&b, name, v); err != nil {
		return "", fmt.Errorf("console: render %s/%s: %w", page, name, err)
	}
	return b.String(), nil
}

var funcs = template.FuncMap{
	"time":     timeTag,
	"status":   statusTag,
	"age":      age,
	"pretty":   pretty,
	"statuses": func() []domain.Status { return domain.Statuses[:] },
	"terminal": func(s domain.Status) bool { return s.Terminal() },
	"progress": progressText,
}

// timeTag shows a time in UTC; the console's script rewrites it into the
// viewer's time zone and keeps the UTC value on hover (title). Without the
// script the page shows UTC, which is still correct.
func timeTag(t any) template.HTML {
	var tt time.Time
	switch x := t.(type) {
	case time.Time:
		tt = x
	case domain.Time:
		tt = x.Time
	case *domain.Time:
		if x == nil {
			return ""
		}
		tt = x.Time
	case *time.Time:
		if x == nil {
			return ""
		}
		tt = *x
	default:
		return ""
	}
	if tt.IsZero() {
		return ""
	}
	return template.HTML(appendTimeTag(nil, tt))
}

// appendTimeTag appends timeTag's markup for t (not zero). Both layouts
// write only digits, letters, spaces and "-:.", so nothing needs escaping.
// The digits are written by hand for years 0 to 9999 (a page has two times a
// row, and AppendFormat parses its layout each time).
func appendTimeTag(b []byte, t time.Time) []byte {
	u := t.UTC()
	b = append(b, `<time datetime="`...)
	iso := len(b)
	year, month, day := u.Date()
	if year < 0 || year > 9999 {
		b = u.AppendFormat(b, domain.TimeLayout)
		isoEnd := len(b)
		b = append(b, `" title="`...)
		b = append(b, b[iso:isoEnd]...)
		b = append(b, `">`...)
		b = u.AppendFormat(b, "2006-01-02 15:04:05 UTC")
		return append(b, "</time>"...)
	}
	hour, minute, sec := u.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, u.Nanosecond()/1e6, 3)
	b = append(b, 'Z')
	isoEnd := len(b)
	b = append(b, `" title="`...)
	b = append(b, b[iso:isoEnd]...)
	b = append(b, `">`...)
	b = append(b, b[iso:iso+10]...) // the date
	b = append(b, ' ')
	b = append(b, b[iso+11:iso+19]...) // the time to the second
	return append(b, " UTC</time>"...)
}

// appendDigits appends n (0 <= n < 10^width, width <= 4) in width digits.
func appendDigits(b []byte, n, width int) []byte {
	var d [4]byte
	for i := width - 1; i >= 0; i-- {
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, d[:width]...)
}

// statusTag shows a status as its word of docs/reference.md §3 on a colour: never colour alone.
func statusTag(v any) template.HTML {
	var s domain.Status
	switch x := v.(type) {
	case domain.Status:
		s = x
	case *domain.Status:
		if x == nil {
			return ""
		}
		s = *x
	case string:
		s = domain.Status(x)
	}
	return template.HTML(appendStatus(nil, s))
}

// age is how long ago t was, rounded for reading ("3m 20s").
func age(now time.Time, t *time.Time) string {
	if t == nil {
		return "—"
	}
	d := now.Sub(*t)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// pretty indents a JSON value for reading.
func pretty(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return ""
	}
	return string(b)
}

// progressText reads a stored progress ({"percent": .., "message": ..}) for
// the page: "40% · page 4 of 10".
func progressText(raw json.RawMessage) string {
	var p struct {
		Percent *float64 `json:"percent"`
		Message string   `json:"message"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &p) != nil {
		return ""
	}
	out := ""
	if p.Percent != nil {
		out = fmt.Sprintf("%g%%", *p.Percent)
	}
	if p.Message != "" {
		if out != "" {
			out += " · "
		}
		out += p.Message
	}
	return out
}
