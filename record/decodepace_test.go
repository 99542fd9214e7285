package record

import (
	"testing"

	"github.com/tracer-dev/tracer/internal/gcpace"
)

// askedPercent is the collector's percentage asked of gcpace now.
func askedPercent() int {
	p := gcpace.SetPercent(0)
	gcpace.SetPercent(p)
	return p
}

// TestPaceDecode: the percentage is decodePercent while any decode in
// memory runs, and the one before once the last has ended, however they
// overlap; a file over decodePaceMax and a GOGC set by the user leave it.
func TestPaceDecode(t *testing.T) {
	t.Setenv("GOGC", "")
	defer gcpace.SetPercent(gcpace.SetPercent(25))
	end1 := paceDecode(decodePaceMax)
	if got := askedPercent(); got != decodePercent {
		t.Fatalf("during a decode: percentage %d, want %d", got, decodePercent)
	}
	end2 := paceDecode(decodePaceMax)
	end1()
	end1() // a second call changes nothing
	if got := askedPercent(); got != decodePercent {
		t.Fatalf("one of two decodes ended: percentage %d, want %d", got, decodePercent)
	}
	end2()
	if got := askedPercent(); got != 25 {
		t.Fatalf("both decodes ended: percentage %d, want 25", got)
	}
	end := paceDecode(decodePaceMax + 1)
	if got := askedPercent(); got != 25 {
		t.Errorf("a file over decodePaceMax: percentage %d during its decode, want 25 (unchanged)", got)
	}
	end()
	t.Setenv("GOGC", "100")
	end = paceDecode(decodePaceMax)
	if got := askedPercent(); got != 25 {
		t.Errorf("GOGC set: percentage %d during a decode, want 25 (unchanged)", got)
	}
	end()
}
