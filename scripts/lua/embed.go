// Package lua holds asyncstatus's Redis scripts, one file per script with a header
// naming its KEYS, ARGV and replies. It exists only because go:embed cannot reach
// files above the embedding package; internal/store loads the scripts.
package lua

import "embed"

// FS holds every *.lua file. Each script gets the parts of lib.lua it names in
// its "--- @include" lines prepended (internal/store/scripts.go, libFor).
//
//go:embed *.lua
var FS embed.FS
