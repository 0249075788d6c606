//go:build !linux

package faults

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
