//go:build linux

package textpages

import (
	"encoding/binary"
	"os"
	"syscall"
	"unsafe"
)

// release drops the pages of the executable's read-only segments that lie
// in private, read-only file mappings of /proc/self/maps, and the page
// interiors of data that lie wholly in one private file mapping.
//
// Why it is safe: madvise(MADV_DONTNEED) on a private file mapping unmaps
// its pages; the next access faults the same bytes back in from the file
// (the page cache, usually). It would lose what a page held only if the
// page had been written since the process started, which a segment never
// is unless the dynamic loader relocated it before making it read-only.
// So release acts only on a position-dependent executable (ELF type EXEC:
// Go's default on Linux), whose read-only segments are loaded at their
// link addresses and need no relocation, only within its read-only
// PT_LOAD segments, and never within its RELRO range (.got, .dynamic),
// whatever the mappings look like. Anything else (a PIE build, an
// unreadable /proc) releases nothing of the segments. data, never written
// (the caller's word), is released only in whole pages of its own and only
// where the mappings show a file under it: on an anonymous mapping
// MADV_DONTNEED would zero the bytes instead.
func release(data [][]byte) int {
	segs, relro := readOnlySegments()
	if len(segs) == 0 && len(data) == 0 {
		return 0
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	page := uint64(os.Getpagesize())
	rlo, rhi := relro[0]&^(page-1), (relro[1]+page-1)&^(page-1)
	released := 0
	for _, m := range readOnlyFileMappings(maps) {
		for _, s := range segs {
			lo := max(m[0], (s[0]+page-1)&^(page-1))
			hi := min(m[1], s[1]&^(page-1))
			if lo >= hi || (lo < rhi && rlo < hi) {
				continue // nothing, or a page of the relocated range
			}
			released += dontNeed(lo, hi)
		}
	}
	return released + releaseData(FileMappings(maps), data, page)
}

// releaseData releases the whole pages inside each of data that lie
// wholly in one of files, and returns how many bytes it released.
func releaseData(files []Mapping, data [][]byte, page uint64) (released int) {
	for _, d := range data {
		start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(d))))
		lo, hi := pageInterior(start, start+uint64(len(d)), page)
		if lo < hi && within(files, lo, hi) {
			released += dontNeed(lo, hi)
		}
	}
	return released
}

// dontNeed is madvise(MADV_DONTNEED) on [lo, hi): the bytes released, or 0
// where it failed (and changed nothing).
func dontNeed(lo, hi uint64) int {
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, uintptr(lo), uintptr(hi-lo), syscall.MADV_DONTNEED); e != 0 {
		return 0
	}
	return int(hi - lo)
}

// readOnlySegments returns the address ranges of the executable's PT_LOAD
// segments without write permission, and its PT_GNU_RELRO range, if it is
// a position-dependent 64-bit little-endian ELF executable; nothing
// otherwise. It reads the program headers itself: debug/elf would link in
// decompressors whose initialization costs every tracer process memory.
func readOnlySegments() (segs [][2]uint64, relro [2]uint64) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, relro
	}
	defer f.Close()
	var eh [64]byte
	if _, err := f.ReadAt(eh[:], 0); err != nil || string(eh[:4]) != "\x7fELF" || eh[4] != 2 || eh[5] != 1 {
		return nil, relro // not ELF64 little-endian
	}
	le := binary.LittleEndian
	const etExec, ptLoad, ptGNURelro, pfW = 2, 1, 0x6474e552, 2
	phoff, phentsize, phnum := le.Uint64(eh[32:]), int(le.Uint16(eh[54:])), int(le.Uint16(eh[56:]))
	if le.Uint16(eh[16:]) != etExec || phentsize < 56 || phnum == 0 || phnum > 256 {
		return nil, relro
	}
	ph := make([]byte, phentsize*phnum)
	if _, err := f.ReadAt(ph, int64(phoff)); err != nil {
		return nil, relro
	}
	for i := 0; i < phnum; i++ {
		p := ph[i*phentsize:]
		typ, flags := le.Uint32(p[0:]), le.Uint32(p[4:])
		vaddr, memsz := le.Uint64(p[16:]), le.Uint64(p[40:])
		switch {
		case typ == ptLoad && flags&pfW == 0:
			segs = append(segs, [2]uint64{vaddr, vaddr + memsz})
		case typ == ptGNURelro:
			relro = [2]uint64{vaddr, vaddr + memsz}
		}
	}
	return segs, relro
}

// readOnlyFileMappings returns the address ranges [lo, hi) of the private
// mappings of files without write permission in maps, the text of
// /proc/PID/maps.
func readOnlyFileMappings(maps []byte) (ranges [][2]uint64) {
	for _, m := range FileMappings(maps) {
		if p := m.Perms; len(p) == 4 && p[1] == '-' && p[3] == 'p' {
			ranges = append(ranges, [2]uint64{m.Lo, m.Hi})
		}
	}
	return ranges
}
