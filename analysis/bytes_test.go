package analysis

import "testing"

func TestBytes_String(t *testing.T) {
	for _, tc := range []struct {
		b    Bytes
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1536, "1.5 KiB"},
		{3 << 20, "3.0 MiB"},
		{-5 << 20, "-5.0 MiB"},
		{3<<30 + 512<<20, "3.50 GiB"},
		{2 << 40, "2.00 TiB"},
	} {
		if got := tc.b.String(); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", int64(tc.b), got, tc.want)
		}
	}
}
