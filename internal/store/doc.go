// Package store is the Redis way of keeping asyncstatus requests: the key schema
// (keys.go), the Lua scripts that make every transition one atomic compare-and-set
// (scripts.go, ../../scripts/lua), and the typed methods the HTTP layer and the
// sweeper call. It imports internal/domain and never internal/httpapi.
package store
