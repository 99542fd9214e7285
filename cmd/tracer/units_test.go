package main

import (
	"strings"
	"testing"
)

// TestParseBytes: sizes that are not numbers of bytes (NaN, which made
// --total-memory write -9223372036854775808 into a trace, and --limit
// remove the limit) are refused as not sizes; sizes past the 2^62 cap are
// refused for the cap.
func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"24GiB", 24 << 30, ""},
		{"1.5GB", 1500000000, ""},
		{"4096TiB", 4096 << 40, ""},
		{"4611686018427387904", 1 << 62, ""},
		{"NaN", 0, "is not a size"},
		{"nanGiB", 0, "is not a size"},
		{"-1", 0, "is not a size"},
		{"-inf", 0, "is not a size"},
		{"lots", 0, "is not a size"},
		{"9223372036854775807", 0, "larger than the largest size tracer takes, 4 EiB"},
		{"inf", 0, "larger than the largest size tracer takes"},
		{"1e400", 0, "larger than the largest size tracer takes"},
		{"4097PB", 0, "is not a size"},
		{"4194305TiB", 0, "larger than the largest size tracer takes"},
	} {
		got, err := parseBytes(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("parseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseBytes(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.err)
		}
	}
}
