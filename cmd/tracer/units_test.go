package main

import (
	"strings"
	"testing"
)

// TestParseBytes: one rule, binary units in any case (24G = 24GB = 24GiB
// = 24gib; 24GB was 22.35 GiB and 24gib refused); sizes that are not numbers of bytes (NaN, which made
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
		{"1.5GB", 3 << 29, ""},
		{"24G", 24 << 30, ""},
		{"24GB", 24 << 30, ""},
		{"24gib", 24 << 30, ""},
		{"24 gb", 24 << 30, ""},
		{"512mb", 512 << 20, ""},
		{"1k", 1024, ""},
		{"100B", 100, ""},
		{"0", 0, ""},
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
