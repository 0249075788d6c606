package httpapi

// view is what a poll answers of a request: the representation (docs/reference.md
// §3), or one of the two views for standard long-running-operation clients
// (§15). Every view is the same read, paced, counted, compared with
// If-None-Match and held by Prefer: wait alike (pollAs); only the encoder differs.
type view uint8

const (
	viewRequest   view = iota // §3
	viewMonitor               // Azure status monitor (azure.go)
	viewOperation             // google.longrunning.Operation (google.go)
)

// namesURLs reports whether the view carries an absolute URL, whose base a
// parked answer must keep (its own context has no Host).
func (v view) namesURLs() bool { return v == viewMonitor }
