package plots

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// niceTicks puts about six labelled ticks at 1, 2 or 5 × 10^k steps, with
// as few decimals as the step needs ("0.5", "1", "1.5" rather than gonum's
// default "0.00", "2.50", "5.00"), and four unlabelled ticks between.
type niceTicks struct{}

// Ticks implements plot.Ticker.
func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 4, 64)}}
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	prec := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	minor := step / 5
	var ts []plot.Tick
	for i := math.Ceil(lo / minor); i*minor <= hi+minor*1e-9; i++ {
		v := i * minor
		t := plot.Tick{Value: v}
		if k := math.Round(v / step); math.Abs(v-k*step) < minor*1e-6 {
			t.Value = k * step
			t.Label = strconv.FormatFloat(t.Value, 'f', prec, 64)
		}
		ts = append(ts, t)
	}
	return ts
}
