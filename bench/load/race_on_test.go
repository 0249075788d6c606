//go:build race

package load

// raceEnabled: the test binary runs under the race detector, so the servers it
// starts are built with -race too (their dependencies are then already compiled
// for the rest of `go test -race ./...`, and races under load show up).
const raceEnabled = true
