package plots

import "testing"

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 4.3, []string{"0", "1", "2", "3", "4"}},
		{0, 2.2, []string{"0.0", "0.5", "1.0", "1.5", "2.0"}},
		{0, 280, []string{"0", "50", "100", "150", "200", "250"}},
		{0, 10, []string{"0", "2", "4", "6", "8", "10"}},
	} {
		var got []string
		for _, tk := range (niceTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("Ticks(%g, %g) labels = %q, want %q", tc.lo, tc.hi, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] && !(i == 0 && got[i] == "0.0") {
				t.Errorf("Ticks(%g, %g) labels = %q, want %q", tc.lo, tc.hi, got, tc.want)
				break
			}
		}
	}
}
