package domain

import "time"

// TenantSummary is what the console shows of a tenant (docs/reference.md §14): its counts by
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

// ConsoleSession is a signed-in console session (docs/reference.md §14), stored under the
// digest of its cookie value only.
type ConsoleSession struct {
	KeyID    string
	Tenant   string // "" for an operator key
	Operator bool
	Expires  time.Time
}

// TenantPage is what the console's requests page reads of the store at once:
// a page of a tenant's requests, the tenant's summary and the caller's session.
type TenantPage struct {
	// Page is the listing; nil when ListErr is set.
	Page *ListPage
	// ListErr is the listing's refusal or failure (a frozen tenant, a bad
	// cursor); the summary is read all the same.
	ListErr error
	Summary TenantSummary
	// Session is the console session asked for, SessionErr its read's error
	// (NotFound when there is none or it expired); both zero when none was asked.
	Session    ConsoleSession
	SessionErr error
}
