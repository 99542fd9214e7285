package grow

import "syscall"

// mapAnon maps size bytes of private anonymous memory, zero, with no swap
// reserved for them (MAP_NORESERVE): address space until touched.
func mapAnon(size uintptr) ([]byte, bool) {
	m, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	return m, err == nil
}

// unmap gives back a mapping mapAnon made.
func unmap(m []byte) { syscall.Munmap(m) }
