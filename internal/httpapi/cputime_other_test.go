//go:build !unix

package httpapi_test

import "time"

// processCPU is not measured here; the benchmarks then report 0 cpu-ns/op.
func processCPU() time.Duration { return 0 }
