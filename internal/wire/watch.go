package wire

import "github.com/asyncstatus/asyncstatus/internal/domain"

// watchParams are the query parameters a watch (GET /v1/requests?watch=true,
// docs/reference.md §16) accepts: the list's filters that apply to a change.
// The others (times, limit, cursor, ids) name pages, not changes: 400.
var watchParams = map[string]bool{"watch": true, "type": true, "status": true, "label_selector": true}

// WantsWatch reports whether a list query asks for a watch (watch=true);
// watch=false, or no watch, is a listing.
func WantsWatch(values map[string][]string) bool {
	return first(values["watch"]) == "true"
}

// DecodeWatchQuery validates the query of a watch: type, status
// (comma-separated, repeatable; the status a change left the request in) and
// label_selector (up to four terms) as for the list; nothing else.
func DecodeWatchQuery(values map[string][]string) (domain.WatchFilter, error) {
	var v validator
	checkParams(&v, values, watchParams, "not a filter of a watch (known: type, status, label_selector)")
	f := domain.WatchFilter{Type: decodeType(&v, values), Statuses: decodeStatuses(&v, values)}
	f.LabelSelector = decodeLabelSelector(&v, first(values["label_selector"]))
	if len(v.errs) > 0 {
		return domain.WatchFilter{}, &domain.Error{Code: domain.ValidationFailed, Message: "The query is not valid.", Fields: v.errs}
	}
	return f, nil
}
