package plots

import (
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

// EmbeddedFonts returns the embedded Liberation fonts, ~4.3 MB of []byte in
// the executable's data, for textpages.Release to give their pages back.
//
// Why: gonum/plot's init (font.DefaultCache.Add(liberation.Collection()))
// parses all 12 fonts, and reading them, with the kernel's fault-around,
// maps most of their pages, so every tracer process carried them, even
// `tracer version` or `tracer import`, which never plot. The fonts are only
// ever read, so their pages are still the executable's bytes; on the plot
// path, rendering text reads the parsed fonts, which still point into these
// slices, and the glyph pages it needs fault back in as it goes. main
// releases them with the executable's code, from one read of
// /proc/self/maps: no package init of ours does it.
func EmbeddedFonts() [][]byte { return fontTTFs[:] }
