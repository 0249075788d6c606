//go:build !linux

package httpapi_test

import "time"

// threadCPU is not measured here; the benchmarks then report 0 for it.
func threadCPU() time.Duration { return 0 }
