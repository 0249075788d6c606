//go:build !linux

package main

import "os"

// terminalWidth: outside Linux `requests wait` always prints one line per
// change, as on a pipe.
func terminalWidth(*os.File) (int, bool) { return 0, false }
