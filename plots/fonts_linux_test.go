//go:build linux

package plots

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"

	"github.com/tracer-dev/tracer/internal/textpages"
)

// mappingRss returns the Rss, in bytes, of the mapping of /proc/self/smaps
// that holds addr.
func mappingRss(t *testing.T, addr uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			l, h, _ := strings.Cut(r, "-")
			lo, err1 := strconv.ParseUint(l, 16, 64)
			hi, err2 := strconv.ParseUint(h, 16, 64)
			in = err1 == nil && err2 == nil && uintptr(lo) <= addr && addr < uintptr(hi)
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); in && ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x", addr)
	return 0
}

// touchFonts reads one byte of each page of every font.
func touchFonts() (sum byte) {
	page := os.Getpagesize()
	for _, ttf := range fontTTFs {
		for i := 0; i < len(ttf); i += page {
			sum += ttf[i]
		}
	}
	return sum
}

// releaseFontPages is what main does first: the executable's code and
// read-only data, and the fonts.
func releaseFontPages() int { return textpages.Release(EmbeddedFonts()...) }

// TestReleaseFontPages: the fonts' pages leave the resident set and come
// back when read.
func TestReleaseFontPages(t *testing.T) {
	total := 0
	for _, ttf := range fontTTFs {
		total += len(ttf)
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(fontTTFs[0])))
	touchFonts()
	touched := mappingRss(t, addr)
	released := releaseFontPages()
	after := mappingRss(t, addr)
	t.Logf("fonts %d kB; released %d kB in all; mapping Rss touched %d kB, released %d kB",
		total>>10, released>>10, touched>>10, after>>10)
	if released < total*9/10 {
		t.Errorf("released %d bytes of %d", released, total)
	}
	if touched-after < total/2 {
		t.Errorf("mapping Rss went %d -> %d kB after release, want a drop of at least %d kB",
			touched>>10, after>>10, total>>11)
	}
	touchFonts()
	if again := mappingRss(t, addr); again-after < total/2 {
		t.Errorf("mapping Rss went %d -> %d kB on touching the fonts again, want a rise of at least %d kB",
			after>>10, again>>10, total>>11)
	}
}

func TestReleaseFontPages_fontsIntact(t *testing.T) {
	var before [len(fontTTFs)][sha256.Size]byte
	for i, ttf := range fontTTFs {
		before[i] = sha256.Sum256(ttf)
	}
	face := font.DefaultCache.Lookup(font.Font{Typeface: "Liberation", Variant: "Serif", Style: 1}, vg.Points(12))
	w := face.Width("Peak 12.5 GiB")

	if releaseFontPages() == 0 {
		t.Fatal("released nothing")
	}
	for i, ttf := range fontTTFs {
		if len(ttf) < 4 || binary.BigEndian.Uint32(ttf) != 0x00010000 {
			t.Errorf("font %d: does not start with the TrueType magic: % x", i, ttf[:min(4, len(ttf))])
		}
		if sha256.Sum256(ttf) != before[i] {
			t.Errorf("font %d: bytes changed by the release", i)
		}
	}
	releaseFontPages()
	if got := face.Width("Peak 12.5 GiB"); got != w || w == 0 {
		t.Errorf("text width after release = %v, before %v", got, w)
	}
	if !bytes.Equal(fontTTFs[0][:4], []byte{0, 1, 0, 0}) {
		t.Error("font 0 lost its magic")
	}
}

// BenchmarkReleaseFontPages: release is all of main's release with nothing
// to unmap, touched the same with the fonts' pages mapped, as after init.
func BenchmarkReleaseFontPages(b *testing.B) {
	b.Run("release", func(b *testing.B) { // all of it, the fonts not touched again
		for b.Loop() {
			releaseFontPages()
		}
	})
	b.Run("touched", func(b *testing.B) { // as after init: the fonts' pages mapped
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			touchFonts()
			b.StartTimer()
			releaseFontPages()
		}
	})
}
