//go:build !race

package testenv

// RaceEnabled tells whether the tests run with the race detector, so that
// the services they build ([ServiceBinary]) can be built the same way.
const RaceEnabled = false
