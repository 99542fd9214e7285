//go:build unix

package view

import (
	"os"
	"syscall"
)

const canMap = true

func mapFile(f *os.File, size int) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
}

func unmap(m []byte) { syscall.Munmap(m) }
