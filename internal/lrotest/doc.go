// Package lrotest drives asyncstatus with the standard long-running-operation
// clients, unchanged (docs/reference.md §15): the Azure SDK pollers for Go
// (azcore), JavaScript (@azure/core-lro, in js/) and Python (azure-core, in
// python/), and Google's Go Operations client. Each runs on the embedded
// store's way (miniredis) and on a real redis-server, to every terminal
// status.
//
// It holds only tests and the examples that docs/client.md shows (which the
// tests run). The JavaScript and Python runtimes come from `make deps`
// (mk/lro.mk); a test fails, never skips, when one is missing.
package lrotest
