// Package textpages gives back to the kernel the pages of the tracer
// executable's code and read-only data that the process has touched so far,
// so that only those it goes on to use count in its resident set.
//
// Why: a Go program's initialization runs code and reads data from nearly
// every package linked in (cobra's commands, Arrow's and gonum's tables,
// the plot fonts' parsing), and the kernel maps the executable's pages
// around each one touched (fault-around, 64 KiB at a time). A `tracer
// import` began with about 10 MB of them resident, which its peak counted
// in full, though the import itself uses a fraction. Released once
// initialization is over, the pages that the command then reads come back
// from the page cache (a minor fault each, with the same fault-around).
package textpages

import (
	"bytes"
	"strconv"
)

// Release drops the executable's code and read-only data pages from the
// process's resident set, and the whole pages inside each of data that lie
// in a private file mapping, and returns how many bytes of mappings it
// released; 0 where it could not or need not (other systems, or
// /proc/self/maps unreadable). data must be embedded bytes that are only
// ever read (the plot fonts): their pages are the executable's, wherever
// the linker put them. It never changes what a page holds: see the Linux
// implementation. One read of /proc/self/maps serves both.
func Release(data ...[]byte) int { return release(data) }

// Mapping is a mapping of a file in the text of /proc/PID/maps.
type Mapping struct {
	Lo, Hi uint64 // the address range [Lo, Hi)
	Perms  string // as maps writes them: "r-xp", "rw-p", ...
}

// FileMappings returns the mappings of files (a non-zero inode and a path)
// in maps, the text of /proc/PID/maps: "lo-hi perms offset dev inode
// path". Lines it cannot read are skipped.
func FileMappings(maps []byte) []Mapping {
	var ms []Mapping
	for len(maps) > 0 {
		var line []byte
		line, maps, _ = bytes.Cut(maps, []byte{'\n'})
		f := bytes.Fields(line)
		if len(f) < 6 || string(f[4]) == "0" {
			continue
		}
		l, h, ok := bytes.Cut(f[0], []byte{'-'})
		lo, err1 := strconv.ParseUint(string(l), 16, 64)
		hi, err2 := strconv.ParseUint(string(h), 16, 64)
		if ok && err1 == nil && err2 == nil && lo < hi {
			ms = append(ms, Mapping{Lo: lo, Hi: hi, Perms: string(f[1])})
		}
	}
	return ms
}

// pageInterior returns the whole pages within [start, end): [lo, hi), with
// lo >= hi when there are none.
func pageInterior(start, end, page uint64) (lo, hi uint64) {
	return (start + page - 1) &^ (page - 1), end &^ (page - 1)
}

// within says whether [lo, hi) lies wholly inside one of the mappings.
func within(ms []Mapping, lo, hi uint64) bool {
	for _, m := range ms {
		if m.Lo <= lo && hi <= m.Hi {
			return true
		}
	}
	return false
}
