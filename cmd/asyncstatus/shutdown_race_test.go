//go:build race

package main

// raceEnabled: shutdown_test.go builds the binary with -race too (which also
// reuses the packages `go test -race` already compiled).
const raceEnabled = true
