package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// parseBytes reads a size such as "24GiB", "512MiB", "1.5GB" or "1048576".
// Binary (KiB, MiB, GiB, TiB) and decimal (KB, MB, GB, TB) units are both
// accepted; "K", "M", "G" alone mean binary units, as in PyTorch's messages.
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if isRange(err) || err == nil && v*mult > maxBytes {
		return 0, fmt.Errorf("%q is larger than the largest size tracer takes, 4 EiB (2^62 bytes)", s)
	}
	// NaN and negative sizes are refused; NaN fails every comparison.
	if err != nil || !(v >= 0) {
		return 0, fmt.Errorf("%q is not a size (try 24GiB, 512MiB or a number of bytes)", s)
	}
	return int64(v * mult), nil
}

// maxBytes is the largest size parseBytes takes: sums of a few such sizes
// (a limit plus what is reserved) stay within an int64.
const maxBytes = 1 << 62

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// isTerminal reports whether f is a character device (a terminal), the
// condition for progress output.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// warnTo writes a library's warnings as "warning: ..." lines on w.
func warnTo(w io.Writer) func(string) {
	return func(msg string) { fmt.Fprintln(w, "warning: "+msg) }
}
