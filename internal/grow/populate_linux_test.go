package grow

import "testing"

// Populate makes the pages of the elements asked for resident, and no
// others, and changes no byte.
func TestPopulate(t *testing.T) {
	// 16 MiB of fresh memory, in a mapping of its own: the heap may hand
	// back pages that another test left resident.
	const pages = 4096
	var h OffHeap
	defer h.Release()
	s := MakeOff[uint64](&h, pages*512, pages*512, NoHuge)
	for i := 0; i < len(s); i += 4099 {
		s[i] = uint64(i) // some pages written before, with values to keep
	}
	g := PagesOf(s)
	before := residentPages(t, g)
	if !g.Populate(0, len(s)/2) {
		t.Skip("MADV_POPULATE_WRITE: not on this kernel")
	}
	want := before/2 + pages/2 // the first half's, and the second's written before
	if got := residentPages(t, g); got < want-2 || got > want+2 {
		t.Errorf("after Populate of half of %d pages: %d resident (%d before), want %d", pages, got, before, want)
	}
	for i := range s {
		want := uint64(0)
		if i%4099 == 0 {
			want = uint64(i)
		}
		if s[i] != want {
			t.Fatalf("s[%d] = %d after Populate, want %d", i, s[i], want)
		}
	}
	if !g.Populate(len(s), len(s)+10) || !PagesOf([]byte{}).Populate(0, 1) {
		t.Error("Populate of nothing failed")
	}
}

// residentPages counts the resident pages of g.
func residentPages(t *testing.T, g Pages) int {
	t.Helper()
	n, ok := g.Resident(0, g.Len())
	if !ok {
		t.Skip("mincore failed")
	}
	return n
}
