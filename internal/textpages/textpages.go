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
// from the page cache (a minor fault each, with the same fault-around):
// the import of a real 9.6 MB snapshot peaked at 13.6–14.2 MiB instead of
// 15.9–16.4 on the GPU machine's host, no slower (2026-11-22).
package textpages

// Release drops the executable's code and read-only data pages from the
// process's resident set and returns how many bytes of mappings it
// released; 0 where it could not or need not (other systems, or
// /proc/self/maps unreadable). It never changes what a page holds: see
// the Linux implementation.
func Release() int { return release() }
