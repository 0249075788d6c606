package wire

import "github.com/asyncstatus/asyncstatus/internal/domain"

// countsParams are the query parameters GET /v1/requests/counts accepts.
var countsParams = map[string]bool{"type": true, "label_selector": true, "created_after": true, "created_before": true}

// DecodeCountsQuery validates the query of GET /v1/requests/counts
// (docs/reference.md §16): type, label_selector (one term), created_after,
// created_before, each at most once; type and label_selector not together
// (docs/api.md says why). The answer is a ListFilter with those set.
func DecodeCountsQuery(values map[string][]string) (domain.ListFilter, error) {
	var v validator
	checkParams(&v, values, countsParams, "unknown query parameter (known: type, label_selector, created_after, created_before)")
	f := domain.ListFilter{Type: decodeType(&v, values)}
	if sel := first(values["label_selector"]); sel != "" {
		f.LabelSelector = decodeLabelSelector(&v, sel)
		switch {
		case len(f.LabelSelector.Pairs()) > 1:
			v.add("label_selector", "counts take one term name=value")
		case f.Type != "" && f.LabelSelector != "":
			v.add("label_selector", "counts take type or label_selector, not both")
		}
	}
	f.CreatedAfter = listTime(&v, "created_after", first(values["created_after"]))
	f.CreatedBefore = listTime(&v, "created_before", first(values["created_before"]))
	if f.CreatedAfter != nil && f.CreatedBefore != nil && f.CreatedBefore.Before(*f.CreatedAfter) {
		v.add("created_before", "must not be before created_after")
	}
	if len(v.errs) > 0 {
		return domain.ListFilter{}, &domain.Error{Code: domain.ValidationFailed, Message: "The query is not valid.", Fields: v.errs}
	}
	return f, nil
}
