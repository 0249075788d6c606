package testenv

import "syscall"

// sysProcAttr makes the child receive SIGKILL when the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
