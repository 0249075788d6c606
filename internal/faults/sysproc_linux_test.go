package faults

import "syscall"

// sysProcAttr makes the service die with the test binary (timeout panic, crash).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
