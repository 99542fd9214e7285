package record

import (
	"testing"

	"github.com/tracer-dev/tracer/internal/gcpace"
	"github.com/tracer-dev/tracer/record/torchsnap"
)

// askedPercent is the collector's percentage asked of gcpace now.
func askedPercent() int {
	p := gcpace.SetPercent(0)
	gcpace.SetPercent(p)
	return p
}

// TestPaceDecode: the percentage is decodePercent while any decode in
// memory runs, and the one before once the last has ended, however they
// overlap; a file over torchsnap.ScratchMax and a GOGC set by the user leave it.
func TestPaceDecode(t *testing.T) {
	t.Setenv("GOGC", "")
	defer gcpace.SetPercent(gcpace.SetPercent(25))
	end1 := paceDecode(torchsnap.ScratchMax)
	if got := askedPercent(); got != decodePercent {
		t.Fatalf("during a decode: percentage %d, want %d", got, decodePercent)
	}
	end2 := paceDecode(torchsnap.ScratchMax)
	end1()
	end1() // a second call changes nothing
	if got := askedPercent(); got != decodePercent {
		t.Fatalf("one of two decodes ended: percentage %d, want %d", got, decodePercent)
	}
	end2()
	if got := askedPercent(); got != 25 {
		t.Fatalf("both decodes ended: percentage %d, want 25", got)
	}
	end := paceDecode(torchsnap.ScratchMax + 1)
	if got := askedPercent(); got != 25 {
		t.Errorf("a file over torchsnap.ScratchMax: percentage %d during its decode, want 25 (unchanged)", got)
	}
	end()
	t.Setenv("GOGC", "100")
	end = paceDecode(torchsnap.ScratchMax)
	if got := askedPercent(); got != 25 {
		t.Errorf("GOGC set: percentage %d during a decode, want 25 (unchanged)", got)
	}
	end()
}
