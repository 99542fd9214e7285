package analysis

import "testing"

func TestHistogram_indexRoundTrip(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 63, 64, 65, 127, 128, 1000, 1 << 20, 1<<40 + 12345, 1<<62 + 1} {
		i := histIndex(v)
		if i < prev || i >= histBuckets {
			t.Errorf("histIndex(%d) = %d after %d", v, i, prev)
		}
		prev = i
		lo := histLower(i)
		if lo > v || float64(v-lo) > float64(v)/32 {
			t.Errorf("histLower(histIndex(%d)) = %d: not within 1/32 below", v, lo)
		}
	}
}
