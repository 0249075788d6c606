package domain

import "time"

// Page sizes of GET /v1/requests (docs/reference.md §4).
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
	// MaxLookupIDs bounds the ids of one lookup (ListFilter.IDs).
	MaxLookupIDs = 100
)

// ListFilter is a validated list query, and who lists (Call, which is not
// part of the filter a cursor is bound to: the tenant is). Zero values mean
// "no filter".
type ListFilter struct {
	Call
	// Type keeps requests of this type only.
	Type string
	// Statuses keeps requests in any of these statuses; sorted, without duplicates.
	Statuses []Status
	// CreatedAfter and CreatedBefore bound created_at, both inclusive.
	CreatedAfter, CreatedBefore *time.Time
	// LabelSelector keeps requests carrying every one of these labels
	// (docs/reference.md §16), at most MaxSelectorTerms; "" for none.
	LabelSelector Labels
	// IDs, when not nil, makes the listing a lookup (docs/reference.md §16):
	// the visible requests among these ids (1..MaxLookupIDs, none of the
	// other filters, no cursor), newest first, on one page.
	IDs []string
	// Limit is the page size, 1..MaxListLimit.
	Limit int
	// Cursor is the opaque continuation from a previous page; "" for the first.
	Cursor string
}

// ListPage is one page of a listing, newest first.
type ListPage struct {
	Items []*Request
	// NextCursor continues the listing; "" when there is no next page.
	NextCursor string
}

// ErrInvalidCursor is the answer to a cursor that is garbled or was made for
// other filters (or another tenant).
func ErrInvalidCursor() *Error {
	return Errorf(InvalidCursor, "The cursor is garbled or was made for other filters; start again without it.")
}
