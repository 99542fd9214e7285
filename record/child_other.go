//go:build !linux

package record

import (
	"errors"
	"os"
	"syscall"
)

// childAttr: only Linux can tie a child's life to its parent's
// (Pdeathsig); elsewhere a program outlives a killed tracer.
func childAttr() *syscall.SysProcAttr { return nil }

// survivors: no /proc to look in for the program's processes.
func survivors(dir string) []string { return nil }

// running reports whether process pid exists.
func running(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
