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
