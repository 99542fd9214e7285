package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// sizeRule is how every size flag reads its value, for --help.
const sizeRule = `Sizes are bytes, or a number with a binary unit as PyTorch counts memory
(its messages' GiB, its settings' _mb): K, M, G, T with or without B or iB, in
any case, so 24G = 24GB = 24GiB = 24gib = 24 x 2^30 bytes; 1.5GiB is allowed.`

// parseBytes reads a size by sizeRule: "24GiB", "24G", "24gb", "512MiB",
// "1.5G" or "1048576". Every unit is binary, as in PyTorch, whose
// max_split_size_mb counts MiB and whose messages print GiB.
func parseBytes(s string) (int64, error) {
	t, mult := splitUnit(strings.ToLower(strings.TrimSpace(s)))
	v, err := strconv.ParseFloat(t, 64)
	if isRange(err) || err == nil && v*mult > maxBytes {
		return 0, fmt.Errorf("%q is larger than the largest size tracer takes, 4 EiB (2^62 bytes)", s)
	}
	// NaN and negative sizes are refused; NaN fails every comparison.
	if err != nil || !(v >= 0) {
		return 0, fmt.Errorf("%q is not a size (try 24GiB, 24G, 512MiB or a number of bytes)", s)
	}
	return int64(v * mult), nil
}

// splitUnit cuts a lower-case size's unit off: the number's text and the
// unit's bytes (1 without a unit, or with "b" alone).
func splitUnit(t string) (string, float64) {
	for i, u := range []string{"k", "m", "g", "t"} {
		for _, suffix := range []string{u + "ib", u + "b", u} {
			if strings.HasSuffix(t, suffix) {
				return strings.TrimSpace(strings.TrimSuffix(t, suffix)), float64(int64(1) << (10 * (i + 1)))
			}
		}
	}
	return strings.TrimSpace(strings.TrimSuffix(t, "b")), 1
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
