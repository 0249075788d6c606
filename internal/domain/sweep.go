package domain

import "slices"

// SweepDue is what one pass of the sweeper (internal/sweep) found due in one
// shard of a tenant, as the store read it: at most a batch of each kind, the
// longest due first. The sweeper decides what to do about it and hands it
// back to the store, which does it.
type SweepDue struct {
	Tenant string
	// Tag is the store's name of the shard; the sweeper only passes it back.
	Tag string
	// Deadlines are processing requests past their processing deadline.
	Deadlines []SweepEntry
	// Queued are queued requests past their queued timeout.
	Queued []SweepEntry
	// Retention are retention buckets that have ended (ID: the bucket's end).
	Retention []SweepEntry
}

// SweepEntry is one due entry: a request (with its type, for a queued one)
// or a retention bucket, and when it fell due (unix milliseconds).
type SweepEntry struct {
	ID, Type string
	Due      float64
}

// Empty tells that nothing is due.
func (d SweepDue) Empty() bool {
	return len(d.Deadlines) == 0 && len(d.Queued) == 0 && len(d.Retention) == 0
}

// Oldest is the earliest due time (unix milliseconds), for the lag figure;
// false when nothing is due.
func (d SweepDue) Oldest() (float64, bool) {
	var t []float64
	for _, es := range [][]SweepEntry{d.Deadlines, d.Queued, d.Retention} {
		if len(es) > 0 {
			t = append(t, es[0].Due)
		}
	}
	if len(t) == 0 {
		return 0, false
	}
	return slices.Min(t), true
}

// Most is the length of the longest of the three lists: a full batch means
// the sweeper may be falling behind.
func (d SweepDue) Most() int { return max(len(d.Deadlines), len(d.Queued), len(d.Retention)) }
