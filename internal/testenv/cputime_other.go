//go:build !unix

package testenv

import "time"

// ProcessCPU is not measured here; the benchmarks then report 0 cpu-ns/op.
func ProcessCPU() time.Duration { return 0 }
