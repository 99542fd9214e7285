//go:build linux

package textpages

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"os"
	"strconv"
	"testing"
)

func TestReadOnlyFileMappings(t *testing.T) {
	maps := []byte(`00400000-00410000 r--p 00000000 fe:00 1234   /usr/bin/tracer
00410000-0095e000 r-xp 00010000 fe:00 1234   /usr/bin/tracer
0095e000-00f85000 r--p 0055e000 fe:00 1234   /usr/bin/tracer
00f86000-00f87000 rw-p 00b85000 fe:00 1234   /usr/bin/tracer
00f87000-01100000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--s 00000000 fe:00 99   /dev/shm/x
7f0000002000-7f0000003000 r--p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0    [stack]
garbage line
`)
	got := readOnlyFileMappings(maps)
	want := [][2]uint64{{0x400000, 0x410000}, {0x410000, 0x95e000}, {0x95e000, 0xf85000}}
	if len(got) != len(want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("mapping %d: got %x, want %x", i, got[i], want[i])
		}
	}
}

// payload is read-only data of the test binary, hashed before and after
// the release: the bytes must come back the same.
const payload = "textpages test payload: " +
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" +
	"fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

func residentPages(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip(err)
	}
	f := bytes.Fields(b)
	n, err := strconv.Atoi(string(f[1]))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRelease releases the test binary's own code and read-only data: the
// resident set must shrink, and the process must go on with the same
// bytes (it keeps running this code, and hashes the same constant).
func TestRelease(t *testing.T) {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	typ := f.Type
	f.Close()
	before := sha256.Sum256([]byte(payload))
	rss := residentPages(t)
	n := Release()
	if typ != elf.ET_EXEC {
		if n != 0 {
			t.Fatalf("a %v executable: released %d bytes, want none", typ, n)
		}
		t.Skipf("the test binary is %v, not a position-dependent executable", typ)
	}
	if n <= 0 {
		t.Fatal("released nothing")
	}
	if after := residentPages(t); after >= rss {
		t.Errorf("resident pages %d before the release, %d after", rss, after)
	}
	if sha256.Sum256([]byte(payload)) != before {
		t.Fatal("read-only data changed across the release")
	}
	// Again, with everything touched since faulted back in.
	if Release() <= 0 || sha256.Sum256([]byte(payload)) != before {
		t.Fatal("a second release failed or changed the data")
	}
}

// TestReadOnlySegments checks the hand-read program headers against
// debug/elf's reading of the same file.
func TestReadOnlySegments(t *testing.T) {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	segs, relro := readOnlySegments()
	if f.Type != elf.ET_EXEC {
		if segs != nil {
			t.Fatalf("a %v executable: segments %x, want none", f.Type, segs)
		}
		t.Skipf("the test binary is %v", f.Type)
	}
	var want [][2]uint64
	var wantRelro [2]uint64
	for _, p := range f.Progs {
		switch {
		case p.Type == elf.PT_LOAD && p.Flags&elf.PF_W == 0:
			want = append(want, [2]uint64{p.Vaddr, p.Vaddr + p.Memsz})
		case p.Type == elf.PT_GNU_RELRO:
			wantRelro = [2]uint64{p.Vaddr, p.Vaddr + p.Memsz}
		}
	}
	if len(want) == 0 || len(segs) != len(want) || relro != wantRelro {
		t.Fatalf("segments %x relro %x, debug/elf says %x and %x", segs, relro, want, wantRelro)
	}
	for i := range want {
		if segs[i] != want[i] {
			t.Fatalf("segment %d: %x, debug/elf says %x", i, segs[i], want[i])
		}
	}
}

func TestWithinPageInterior(t *testing.T) {
	maps := []byte(`00400000-0040f000 r--p 00000000 08:01 1234                               /usr/bin/tracer
00f65000-00f66000 r--p 00b65000 08:01 1234                               /usr/bin/tracer
00f66000-01495000 rw-p 00b66000 08:01 1234                               /usr/bin/tracer
01495000-03554000 rw-p 00000000 00:00 0 
0431c000-0433d000 rw-p 00000000 00:00 0                                  [heap]
7f1000000000-7f1000002000 r--p 00000000 08:01 99                         /path with spaces/lib.so
garbage
`)
	files := FileMappings(maps)
	if len(files) != 4 || files[2] != (Mapping{0xf66000, 0x1495000, "rw-p"}) {
		t.Fatalf("FileMappings = %x", files)
	}
	for _, c := range []struct {
		lo, hi uint64
		want   bool
	}{
		{0x1000000, 0x1010000, true},  // inside the rw-p file mapping
		{0xf66000, 0x1495000, true},   // all of it
		{0x1490000, 0x1496000, false}, // runs into the bss (anonymous)
		{0xf60000, 0xf67000, false},   // across two file mappings
		{0x1496000, 0x1497000, false}, // the bss alone
		{0x431c000, 0x431d000, false}, // [heap]
	} {
		if got := within(files, c.lo, c.hi); got != c.want {
			t.Errorf("within(%#x, %#x) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	for _, c := range []struct{ start, end, lo, hi uint64 }{
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

// TestReleaseData_notFileBacked: data on the heap (anonymous memory, which
// MADV_DONTNEED would zero) is never released, whatever the mappings say
// of other addresses.
func TestReleaseData_notFileBacked(t *testing.T) {
	page := uint64(os.Getpagesize())
	heap := bytes.Repeat([]byte{0xA5}, 4*int(page))
	files := []Mapping{{Lo: 0x1000, Hi: 0x2000, Perms: "r--p"}}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	for name, fs := range map[string][]Mapping{"none": nil, "elsewhere": files, "this process's": FileMappings(maps)} {
		if n := releaseData(fs, [][]byte{heap}, page); n != 0 {
			t.Errorf("%s mappings: released %d bytes of heap data", name, n)
		}
	}
	if !bytes.Equal(heap, bytes.Repeat([]byte{0xA5}, 4*int(page))) {
		t.Fatal("heap data changed")
	}
}
