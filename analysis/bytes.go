package analysis

import "strconv"

// Bytes is a byte count that prints with a binary unit chosen by magnitude,
// so every number in a report carries its unit ("512 B", "3.2 MiB",
// "1.50 GiB"). JSON encodes it as a plain integer.
type Bytes int64

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
	tib = 1 << 40
)

// String formats b with B, KiB, MiB, GiB or TiB: whole bytes below 1 KiB,
// one decimal for KiB and MiB, two for GiB and above (a 80 GiB GPU is then
// readable to about 10 MiB).
func (b Bytes) String() string {
	v := int64(b)
	neg := v < 0
	if neg {
		v = -v
	}
	var s string
	switch {
	case v < kib:
		s = strconv.FormatInt(v, 10) + " B"
	case v < mib:
		s = strconv.FormatFloat(float64(v)/kib, 'f', 1, 64) + " KiB"
	case v < gib:
		s = strconv.FormatFloat(float64(v)/mib, 'f', 1, 64) + " MiB"
	case v < tib:
		s = strconv.FormatFloat(float64(v)/gib, 'f', 2, 64) + " GiB"
	default:
		s = strconv.FormatFloat(float64(v)/tib, 'f', 2, 64) + " TiB"
	}
	if neg {
		return "-" + s
	}
	return s
}

// Unit returns the divisor and name of the binary unit that suits values up
// to max bytes (at least KiB), for axes that must share one unit.
func Unit(max int64) (div float64, name string) {
	switch {
	case max >= tib:
		return tib, "TiB"
	case max >= gib:
		return gib, "GiB"
	case max >= mib:
		return mib, "MiB"
	default:
		return kib, "KiB"
	}
}
