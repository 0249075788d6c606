// Package wire is the JSON of the HTTP API (docs/reference.md §3, §4, §10): the strict
// decoders of every request body and of the list query, which turn bytes into
// the domain's validated inputs or a VALIDATION_FAILED naming each bad field,
// and the encoder of the request representation.
//
// It sits beside internal/httpapi rather than inside it because the operator
// console decodes the same list query. It imports only internal/domain; the
// store and the webhook package do not import it, their inputs arrive decoded.
// The decoders and the encoder are on every request's path: each has a fast
// path for the common shapes, held to the reference (encoding/json) path by
// fuzz tests.
package wire
