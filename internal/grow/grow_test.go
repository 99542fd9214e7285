package grow

import "testing"

// Double keeps the elements, doubles the capacity, and honours need.
func TestDouble(t *testing.T) {
	s := make([]int, 100, 100)
	for i := range s {
		s[i] = i
	}
	d := Double(s, 0)
	if len(d) != 100 || cap(d) != 200 || d[99] != 99 || &d[0] == &s[0] {
		t.Fatalf("Double(100 of 100, 0): len %d cap %d last %d", len(d), cap(d), d[99])
	}
	if d := Double(s, 1000); cap(d) != 1000 {
		t.Errorf("Double(100 of 100, 1000): cap %d, want 1000", cap(d))
	}
	if d := Double([]int(nil), 0); cap(d) != 64 || len(d) != 0 {
		t.Errorf("Double(nil, 0): len %d cap %d, want 0 and 64", len(d), cap(d))
	}
}
