//go:build !linux

package outfile

import (
	"errors"
	"os"
	"syscall"
)

// openUnnamed: only Linux has O_TMPFILE; Create falls back to named files.
func openUnnamed(dir string) (*os.File, error) { return nil, errUnsupported }

// anonymous opens a scratch file in dir that loses its name at once.
func anonymous(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ".tracer-out-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// link is never called where openUnnamed fails.
func link(f *os.File, path string) error { return errors.New("outfile: no unnamed files here") }

// running reports whether process pid exists.
func running(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
