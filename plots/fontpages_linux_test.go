//go:build linux

package plots

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
)

func TestFileMappings(t *testing.T) {
	maps := []byte(`00400000-0040f000 r--p 00000000 08:01 1234                               /usr/bin/tracer
00f65000-00f66000 r--p 00b65000 08:01 1234                               /usr/bin/tracer
00f66000-01495000 rw-p 00b66000 08:01 1234                               /usr/bin/tracer
01495000-03554000 rw-p 00000000 00:00 0 
0431c000-0433d000 rw-p 00000000 00:00 0                                  [heap]
7f0000000000-7f0000021000 rw-p 00000000 00:01 0                          [anon:x]
7f1000000000-7f1000002000 r--p 00000000 08:01 99                         /path with spaces/lib.so
7ffd1000-7ffd2000 r-xp 00000000 00:00 0                                  [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
garbage
`)
	got := fileMappings(maps)
	want := [][2]uintptr{
		{0x400000, 0x40f000}, {0xf65000, 0xf66000}, {0xf66000, 0x1495000},
		{0x7f1000000000, 0x7f1000002000},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fileMappings = %x, want %x", got, want)
	}
	for _, c := range []struct {
		lo, hi uintptr
		want   bool
	}{
		{0x1000000, 0x1010000, true},  // inside the rw-p file mapping
		{0xf66000, 0x1495000, true},   // all of it
		{0x1490000, 0x1496000, false}, // runs into the bss (anonymous)
		{0xf60000, 0xf67000, false},   // across two file mappings
		{0x1496000, 0x1497000, false}, // the bss alone
		{0x431c000, 0x431d000, false}, // [heap]
	} {
		if got := within(fileMappings(maps), c.lo, c.hi); got != c.want {
			t.Errorf("within(%#x, %#x) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	if got := fileMappings(nil); len(got) != 0 {
		t.Errorf("fileMappings(nil) = %v", got)
	}
}

func TestPageInterior(t *testing.T) {
	for _, c := range []struct{ start, end, lo, hi uintptr }{
		{0x1000, 0x3000, 0x1000, 0x3000},
		{0x1001, 0x3fff, 0x2000, 0x3000},
		{0x1580, 0x2fff, 0x2000, 0x2000}, // no whole page: lo >= hi
		{0x1580, 0x1600, 0x2000, 0x1000},
	} {
		if lo, hi := pageInterior(c.start, c.end, 0x1000); lo != c.lo || hi != c.hi {
			t.Errorf("pageInterior(%#x, %#x) = %#x, %#x; want %#x, %#x", c.start, c.end, lo, hi, c.lo, c.hi)
		}
	}
}

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

func TestReleaseFontPages(t *testing.T) {
	if initReleased == 0 {
		t.Errorf("init released nothing")
	}
	total := 0
	for _, ttf := range fontTTFs {
		total += len(ttf)
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(fontTTFs[0])))
	touchFonts()
	touched := mappingRss(t, addr)
	released := releaseFontPages()
	after := mappingRss(t, addr)
	t.Logf("fonts %d kB; released %d kB (init %d kB); mapping Rss touched %d kB, released %d kB",
		total>>10, released>>10, initReleased>>10, touched>>10, after>>10)
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

// Without a file-backed mapping around the fonts, nothing is released.
func TestReleaseFontPages_notFileBacked(t *testing.T) {
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(fontTTFs[0])))
	anon := fmt.Sprintf("%x-%x rw-p 00000000 00:00 0 \n", addr&^0xfffff, addr+64<<20)
	for name, files := range map[string][][2]uintptr{
		"none": nil, "anonymous": fileMappings([]byte(anon)),
		"elsewhere": {{0x1000, 0x2000}},
	} {
		touchFonts()
		before := mappingRss(t, addr)
		if n := releaseFontPagesIn(files); n != 0 {
			t.Errorf("%s: released %d bytes", name, n)
		}
		if after := mappingRss(t, addr); after < before {
			t.Errorf("%s: mapping Rss went %d -> %d kB", name, before>>10, after>>10)
		}
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

// BenchmarkReleaseFontPages: maps is the parsing of /proc/self/maps, release
// the whole of releaseFontPages with nothing to unmap, touched the same with
// the fonts' pages mapped, as in init.
func BenchmarkReleaseFontPages(b *testing.B) {
	b.Run("maps", func(b *testing.B) { // reading and parsing /proc/self/maps
		for b.Loop() {
			maps, err := os.ReadFile("/proc/self/maps")
			if err != nil {
				b.Fatal(err)
			}
			fileMappings(maps)
		}
	})
	b.Run("release", func(b *testing.B) { // all of it, the fonts not touched again
		for b.Loop() {
			releaseFontPages()
		}
	})
	b.Run("touched", func(b *testing.B) { // as in init: the fonts' pages mapped
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			touchFonts()
			b.StartTimer()
			releaseFontPages()
		}
	})
}
