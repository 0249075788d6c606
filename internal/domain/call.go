package domain

import "time"

// Call is who makes a call of the store and how it is counted. Every call the
// API makes carries one, embedded in its parameters (CreateParams,
// TransitionParams, PollParams, ListFilter, WatchParams) or as them (the
// webhook calls); the HTTP layer builds it once per request, from the
// authenticated caller. Its strings are the caller's own (not views of a
// reused buffer): the store may keep them past the call.
type Call struct {
	// Tenant whose requests the call is about.
	Tenant string
	// By is the caller's API key id: a create's created_by, a transition's
	// or a delete's actor in the events and the audit trail. "" for a poll
	// token, or a call nobody in particular makes.
	By string
	// Credential names the rate-limit counters the call is counted on: the
	// API key id, or "pt:<id>" for a poll token (docs/pacing.md); "": not
	// counted.
	Credential string
	// Rate, when set, receives the limit the call was counted on, whenever
	// the store counted it, also when the call answers an error.
	Rate *RateInfo
}

// RateInfo is the state of the binding rate limit after a call was counted.
type RateInfo struct {
	Limit     int64
	Remaining int64
	Reset     time.Time
}
