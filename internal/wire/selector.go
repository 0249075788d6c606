package wire

import (
	"strings"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// decodeLabelSelector reads label_selector (docs/reference.md §16):
// "name=value[,name=value...]", at most domain.MaxSelectorTerms terms, each a
// valid label, no name twice (two values of one label never match together).
// It answers the terms in their canonical spelling (sorted by name).
func decodeLabelSelector(v *validator, raw string) domain.Labels {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, ",")
	if len(parts) > domain.MaxSelectorTerms {
		v.add("label_selector", "must have at most %d terms name=value (has %d)", domain.MaxSelectorTerms, len(parts))
		return ""
	}
	ls := make([]domain.Label, 0, len(parts))
	seen := map[string]bool{}
	for _, p := range parts {
		n, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		switch {
		case !ok || !domain.ValidLabelName(n) || !domain.ValidLabelValue(val):
			v.add("label_selector", "%q is not a term name=value (name %s, value %s)", p, domain.LabelNamePattern, domain.LabelValuePattern)
			return ""
		case seen[n]:
			v.add("label_selector", "names label %q twice", n)
			return ""
		}
		seen[n] = true
		ls = append(ls, domain.Label{Name: n, Value: val})
	}
	return domain.MakeLabels(ls)
}
