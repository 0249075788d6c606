package wire

import (
	"strings"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// decodeLookup reads ids= (docs/reference.md §16): 1..MaxLookupIDs
// comma-separated ids (repeated parameters join), with no other parameter.
// Ids are not checked here: a malformed one is an id the caller may not see,
// absent from the answer like an unknown one (§2), not an error.
func decodeLookup(v *validator, values map[string][]string) []string {
	for name, vs := range values {
		if name != "ids" && len(nonEmpty(vs)) > 0 {
			v.add("ids", "cannot be combined with %s: a lookup takes no filter, limit or cursor", name)
			return nil
		}
	}
	ids := []string{}
	for _, raw := range nonEmpty(values["ids"]) {
		for id := range strings.SplitSeq(raw, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	switch {
	case len(ids) == 0:
		v.add("ids", "must name at least one id")
		return nil
	case len(ids) > domain.MaxLookupIDs:
		v.add("ids", "must name at most %d ids (names %d)", domain.MaxLookupIDs, len(ids))
		return nil
	}
	return ids
}
