//go:build race

package faults

// raceEnabled: the service binary is built with -race too, which also reuses the
// packages that `go test -race` already compiled.
const raceEnabled = true
