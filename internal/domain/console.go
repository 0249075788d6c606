package domain

import "time"

// TenantSummary is what the console shows of a tenant (spec §14): its counts by
// status, read from the indexes (never by scanning records), whether it is
// frozen, and the creation times of its oldest queued and processing requests.
type TenantSummary struct {
	Tenant string
	Frozen bool
	Counts map[Status]int64
	// OldestQueued and OldestProcessing are the created_at of the oldest request
	// in that status; nil when there is none.
	OldestQueued, OldestProcessing *time.Time
}

// Total is the number of requests the summary counts.
func (t TenantSummary) Total() int64 {
	var n int64
	for _, c := range t.Counts {
		n += c
	}
	return n
}

// ConsoleSession is a signed-in console session (spec §14), stored under the
// digest of its cookie value only.
type ConsoleSession struct {
	KeyID    string
	Tenant   string // "" for an operator key
	Operator bool
	Expires  time.Time
}
