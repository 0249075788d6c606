package domain

import "context"

// WatchFilter is what a watch of many requests (docs/reference.md §16) keeps:
// changes of requests of Type (any when ""), whose status after the change is
// one of Statuses (any when empty), carrying every label of LabelSelector.
type WatchFilter struct {
	Type          string
	Statuses      []Status
	LabelSelector Labels
}

// Match reports whether r passes the filter.
func (f WatchFilter) Match(r *Request) bool {
	if f.Type != "" && r.Type != f.Type {
		return false
	}
	if len(f.Statuses) > 0 {
		found := false
		for _, s := range f.Statuses {
			if r.Status == s {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	for _, term := range f.LabelSelector.Pairs() {
		if v, ok := r.Labels.Get(term.Name); !ok || v != term.Value {
			return false
		}
	}
	return true
}

// WatchEvent is one event of a watch: a change (Request as the change left
// it, shared: read only) at position ID, or, with Reset, the news that the
// changes since the position the client gave are no longer all known (it
// lists again); ID is then the position the live changes follow.
type WatchEvent struct {
	ID      string
	Request *Request
	Reset   bool
}

// TenantWatch is one held watch of a tenant's requests.
type TenantWatch interface {
	// Next returns the events after the watch's position (maybe none), and a
	// channel closed once there may be more. An error: the store could not
	// be read; the client resumes later from the last event's ID.
	Next(ctx context.Context) ([]WatchEvent, <-chan struct{}, error)
	// Position is the watch's position now (past changes the filter dropped).
	Position() string
	Close()
}

// WatchParams start a watch.
type WatchParams struct {
	// Call is counted once, on the read rate limits.
	Call
	// LastEventID is the position to resume after ("" for live changes only).
	LastEventID string
	Filter      WatchFilter
}
