// Package httpapi is the HTTP way of exposing asyncstatus (docs/reference.md §4): the routes
// (routes.go), credentials and scopes, pacing headers, and problem+json for every
// error, written in one place (problem.go). It depends on internal/domain and on
// small interfaces it declares itself; it never imports internal/store.
package httpapi
