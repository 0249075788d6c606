package httpapi_test

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time (user + system) the calling OS thread has used
// so far: with the goroutine locked to its thread, what the code it runs
// costs, whatever else loads the machine.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
