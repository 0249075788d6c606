package wire

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// listParams are the query parameters GET /v1/requests accepts.
var listParams = map[string]bool{"type": true, "status": true, "created_after": true,
	"created_before": true, "limit": true, "cursor": true, "label_selector": true, "ids": true,
	"watch": true} // watch=true is a watch (watch.go); watch=false a listing

// DecodeListQuery validates the query of GET /v1/requests. values holds every
// value each parameter was given, in order. An empty value counts as absent;
// status may be comma-separated and repeated; the other parameters may be given
// once; unknown parameters are refused like unknown body members, so that a typo
// ("stauts") is not silently a listing of everything.
func DecodeListQuery(values map[string][]string) (domain.ListFilter, error) {
	var v validator
	checkParams(&v, values, listParams, "unknown query parameter (known: type, status, created_after, created_before, limit, cursor, label_selector, ids, watch)")
	if w := first(values["watch"]); w != "" && w != "false" {
		v.add("watch", "must be true or false")
	}
	f := domain.ListFilter{Limit: domain.DefaultListLimit}
	if _, ok := values["ids"]; ok && len(v.errs) == 0 {
		if f.IDs = decodeLookup(&v, values); len(v.errs) > 0 {
			return domain.ListFilter{}, &domain.Error{Code: domain.ValidationFailed, Message: "The query is not valid.", Fields: v.errs}
		}
		return f, nil
	}
	f.Type = decodeType(&v, values)
	f.Statuses = decodeStatuses(&v, values)
	sort.Slice(f.Statuses, func(i, j int) bool { return f.Statuses[i] < f.Statuses[j] })
	f.CreatedAfter = listTime(&v, "created_after", first(values["created_after"]))
	f.CreatedBefore = listTime(&v, "created_before", first(values["created_before"]))
	if f.CreatedAfter != nil && f.CreatedBefore != nil && f.CreatedBefore.Before(*f.CreatedAfter) {
		v.add("created_before", "must not be before created_after")
	}
	if l := first(values["limit"]); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > domain.MaxListLimit {
			v.add("limit", "must be an integer from 1 to %d", domain.MaxListLimit)
		}
		f.Limit = n
	}
	f.Cursor = first(values["cursor"])
	f.LabelSelector = decodeLabelSelector(&v, first(values["label_selector"]))
	if len(v.errs) > 0 {
		return domain.ListFilter{}, &domain.Error{Code: domain.ValidationFailed, Message: "The query is not valid.", Fields: v.errs}
	}
	return f, nil
}

func nonEmpty(vs []string) []string {
	var out []string
	for _, s := range vs {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func first(vs []string) string {
	if ne := nonEmpty(vs); len(ne) > 0 {
		return ne[0]
	}
	return ""
}

func listTime(v *validator, field, raw string) *time.Time {
	if raw == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		v.add(field, "must be an RFC 3339 time, e.g. 2026-11-29T10:00:00Z")
		return nil
	}
	t = t.UTC()
	return &t
}

// checkParams refuses the query parameters that are not known (why says so
// and names the known ones), and any but status given more than once (status
// may be repeated). Names are checked in order, so the errors are too.
func checkParams(v *validator, values map[string][]string, known map[string]bool, why string) {
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !known[name] {
			v.add(name, "%s", why)
		} else if name != "status" && len(nonEmpty(values[name])) > 1 {
			v.add(name, "must be given at most once")
		}
	}
}

// decodeType is the type filter ("" for none).
func decodeType(v *validator, values map[string][]string) string {
	t := first(values["type"])
	if t != "" && !domain.ValidType(t) {
		v.add("type", "must match %s", domain.TypePattern)
	}
	return t
}

// decodeStatuses is the status filter: comma-separated and repeatable, each
// status once, in the order given.
func decodeStatuses(v *validator, values map[string][]string) []domain.Status {
	var out []domain.Status
	seen := map[domain.Status]bool{}
	for _, raw := range nonEmpty(values["status"]) {
		for _, s := range strings.Split(raw, ",") {
			st := domain.Status(strings.ToLower(strings.TrimSpace(s)))
			if !st.Valid() {
				v.add("status", "%q is not a status (queued, processing, succeeded, failed, cancelled, expired)", s)
				continue
			}
			if !seen[st] {
				seen[st] = true
				out = append(out, st)
			}
		}
	}
	return out
}
