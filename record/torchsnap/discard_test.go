package torchsnap

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"unsafe"
)

// TestDiscardBefore: the events of a trace decoded outside the heap go back
// to the system (and read as zero) once both the caller and Validate are
// past them, and not before either is.
func TestDiscardBefore(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("events are mapped outside the heap on Linux only")
	}
	path := filepath.Join(t.TempDir(), "scaled.pickle")
	if err := os.WriteFile(path, scaledSnapshot(t, scaledPath, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	var per int64 // events a granule (packed)
	open := func() *Device {
		s, err := ReadFileMapped(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		per = int64(discardGrain(s.mapped) / unsafe.Sizeof(srec{}))
		if d := s.Devices[0]; d.Len() >= 6*per && d.recs != nil {
			return d
		}
		t.Fatalf("%d events (packed %v); the test needs %d, packed", s.Devices[0].Len(), s.Devices[0].recs != nil, 6*per)
		return nil
	}
	gone := func(d *Device, i int64) bool { return d.recs[i] == srec{} }

	// The caller first, then Validate.
	d := open()
	want := slices.Clone(d.recs)
	d.DiscardBefore(4 * per)
	if !slices.Equal(d.recs, want) {
		t.Fatal("events given back before Validate read them")
	}
	probs := d.Validate()
	if !gone(d, 2*per) {
		t.Error("after Validate, the events before both positions are still there")
	}
	if gone(d, 4*per+per/2) || gone(d, d.Len()-1) {
		t.Error("events past the caller's position given back")
	}

	// Validate first, then the caller.
	d = open()
	if p := d.Validate(); len(p) != len(probs) {
		t.Errorf("Validate: %d problems, then %d", len(probs), len(p))
	}
	d.DiscardBefore(4 * per)
	if !gone(d, 2*per) || gone(d, 4*per+per/2) {
		t.Errorf("after the caller: event %d given back %v (want true), event %d %v (want false)",
			2*per, gone(d, 2*per), 4*per+per/2, gone(d, 4*per+per/2))
	}
	if d.recs[4*per+per/2] != want[4*per+per/2] {
		t.Error("an event kept has changed")
	}
}
