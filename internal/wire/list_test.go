package wire

import (
	"slices"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

func TestDecodeListQuery(t *testing.T) {
	f, err := DecodeListQuery(map[string][]string{
		"type": {"statement.export"}, "status": {"Failed, queued", "failed"}, "limit": {"7"},
		"created_after": {"2026-01-01T00:00:00.5+01:00"}, "created_before": {""}, "cursor": {"abc"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != "statement.export" || !slices.Equal(f.Statuses, []domain.Status{domain.StatusFailed, domain.StatusQueued}) || f.Limit != 7 ||
		f.CreatedBefore != nil || f.Cursor != "abc" || !f.CreatedAfter.Equal(time.Date(2025, 12, 31, 23, 0, 0, 5e8, time.UTC)) {
		t.Fatalf("%+v", f)
	}
	if f, err := DecodeListQuery(nil); err != nil || f.Limit != domain.DefaultListLimit || f.Statuses != nil {
		t.Fatalf("defaults: %+v %v", f, err)
	}
	for name, q := range map[string]map[string][]string{
		"limit":          {"limit": {"0"}},
		"status":         {"status": {"done"}},
		"type":           {"type": {"A"}},
		"created_after":  {"created_after": {"2026-01-01"}},
		"created_before": {"created_after": {"2026-01-02T00:00:00Z"}, "created_before": {"2026-01-01T00:00:00Z"}},
		"cursor":         {"cursor": {"a", "b"}},
		"sort":           {"sort": {"asc"}},
	} {
		_, err := DecodeListQuery(q)
		e, ok := err.(*domain.Error)
		if !ok || e.Code != domain.ValidationFailed || len(e.Fields) == 0 || e.Fields[0].Field != name {
			t.Errorf("%s: %v", name, err)
		}
	}
}
