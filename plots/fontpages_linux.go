//go:build linux

package plots

import (
	"os"
	"syscall"
	"unsafe"

	"codeberg.org/go-fonts/liberation/liberationmonobold"
	"codeberg.org/go-fonts/liberation/liberationmonobolditalic"
	"codeberg.org/go-fonts/liberation/liberationmonoitalic"
	"codeberg.org/go-fonts/liberation/liberationmonoregular"
	"codeberg.org/go-fonts/liberation/liberationsansbold"
	"codeberg.org/go-fonts/liberation/liberationsansbolditalic"
	"codeberg.org/go-fonts/liberation/liberationsansitalic"
	"codeberg.org/go-fonts/liberation/liberationsansregular"
	"codeberg.org/go-fonts/liberation/liberationserifbold"
	"codeberg.org/go-fonts/liberation/liberationserifbolditalic"
	"codeberg.org/go-fonts/liberation/liberationserifitalic"
	"codeberg.org/go-fonts/liberation/liberationserifregular"

	"github.com/tracer-dev/tracer/internal/textpages"
)

// fontTTFs are the 12 Liberation fonts gonum/plot registers in its init.
var fontTTFs = [...][]byte{
	liberationmonoregular.TTF, liberationmonobold.TTF,
	liberationmonoitalic.TTF, liberationmonobolditalic.TTF,
	liberationsansregular.TTF, liberationsansbold.TTF,
	liberationsansitalic.TTF, liberationsansbolditalic.TTF,
	liberationserifregular.TTF, liberationserifbold.TTF,
	liberationserifitalic.TTF, liberationserifbolditalic.TTF,
}

// initReleased is what init released, for the tests.
var initReleased int

// gonum/plot's init, which parsed the fonts, has run: plots imports it.
func init() { initReleased = releaseFontPages() }

// releaseFontPages gives back to the kernel the pages of the embedded
// Liberation fonts that gonum/plot's init touched, and returns how many
// bytes it released.
//
// Why: gonum/plot's init (font.DefaultCache.Add(liberation.Collection()))
// parses all 12 fonts, ~4.3 MB of []byte embedded in the executable's
// writable data (.noptrdata); reading them, with the kernel's fault-around,
// maps most of those pages, so every tracer process carried them, even
// `tracer version` or `tracer import`, which never plot.
//
// Why it is safe: the fonts are only ever read, so their pages are still the
// executable's bytes, and madvise(MADV_DONTNEED) on a private file mapping
// only unmaps them: the next read faults the same bytes back in from the
// executable (usually still in the page cache; MADV_DONTNEED does not evict
// it, unlike MADV_PAGEOUT or MADV_COLD, which are not used). On an anonymous
// mapping it would zero them instead, so a range is released only if
// /proc/self/maps shows it lies wholly in one file-backed mapping (an inode
// and a path), and only the page-aligned interior of each font is released,
// never a page it shares with other variables. If /proc/self/maps cannot be
// read, nothing is released; a failed madvise changes nothing.
//
// On the plot path, rendering text reads the parsed fonts, which still point
// into these slices, so the glyph pages it needs fault back in as it goes.
func releaseFontPages() (released int) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	return releaseFontPagesIn(fileMappings(maps))
}

// releaseFontPagesIn releases the fonts' pages that lie in files, the
// file-backed mappings.
func releaseFontPagesIn(files [][2]uintptr) (released int) {
	page := uintptr(os.Getpagesize())
	for _, ttf := range fontTTFs {
		start := uintptr(unsafe.Pointer(unsafe.SliceData(ttf)))
		lo, hi := pageInterior(start, start+uintptr(len(ttf)), page)
		if lo >= hi || !within(files, lo, hi) {
			continue
		}
		if syscall.Madvise(ttf[lo-start:hi-start], syscall.MADV_DONTNEED) == nil {
			released += int(hi - lo)
		}
	}
	return released
}

// pageInterior returns the whole pages within [start, end): [lo, hi), with
// lo >= hi when there are none.
func pageInterior(start, end, page uintptr) (lo, hi uintptr) {
	return (start + page - 1) &^ (page - 1), end &^ (page - 1)
}

// fileMappings returns the address ranges [lo, hi) of the file-backed
// mappings in maps, the text of /proc/PID/maps.
func fileMappings(maps []byte) (ranges [][2]uintptr) {
	for _, m := range textpages.FileMappings(maps) {
		ranges = append(ranges, [2]uintptr{uintptr(m.Lo), uintptr(m.Hi)})
	}
	return ranges
}

// within says whether [lo, hi) lies wholly inside one of ranges.
func within(ranges [][2]uintptr, lo, hi uintptr) bool {
	for _, r := range ranges {
		if r[0] <= lo && hi <= r[1] {
			return true
		}
	}
	return false
}
