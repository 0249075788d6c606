package httpapi

import (
	"slices"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// TestParseOperationFilter: the AIP-160 subset of docs/reference.md §15 and
// what it refuses.
func TestParseOperationFilter(t *testing.T) {
	terminal := []domain.Status{domain.StatusCancelled, domain.StatusExpired, domain.StatusFailed, domain.StatusSucceeded}
	for _, c := range []struct {
		filter   string
		typ      string
		statuses []domain.Status
		empty    bool
	}{
		{"", "", nil, false},
		{"done = true", "", terminal, false},
		{"done=false", "", []domain.Status{domain.StatusProcessing, domain.StatusQueued}, false},
		{`metadata.type = "statement.export"`, "statement.export", nil, false},
		{`metadata.type=statement.export AND metadata.status = "failed"`, "statement.export", []domain.Status{domain.StatusFailed}, false},
		{`done = true AND metadata.status = failed`, "", []domain.Status{domain.StatusFailed}, false},
		{`done = true AND metadata.status = "queued"`, "", []domain.Status{}, true},
		{`metadata.type = "a" AND metadata.type = "b"`, "b", nil, true},
		{`metadata.status = "failed" AND metadata.status = "failed"`, "", []domain.Status{domain.StatusFailed}, false},
	} {
		var f domain.ListFilter
		empty, err := parseOperationFilter(c.filter, &f)
		if err != nil || empty != c.empty || f.Type != c.typ || !slices.Equal(f.Statuses, c.statuses) {
			t.Errorf("%q: type %q statuses %v empty %v err %v; want %q %v %v", c.filter, f.Type, f.Statuses, empty, err, c.typ, c.statuses, c.empty)
		}
	}
	for _, bad := range []string{
		"done", "done =", "done = yes", `done = "true"`, "done = true AND", "done = true OR done = false", "done = true and done = false",
		"colour = red", `metadata.type = "Bad Type"`, `metadata.status = "done"`, `metadata.type = "unclosed`, "done == true",
		"= true", `"done" = true`, "done = true done = false",
	} {
		var f domain.ListFilter
		if _, err := parseOperationFilter(bad, &f); err == nil {
			t.Errorf("%q accepted: %+v", bad, f)
		}
	}
}
