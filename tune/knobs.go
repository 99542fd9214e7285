package tune

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tracer-dev/tracer/allocator"
)

// knob is one PYTORCH_CUDA_ALLOC_CONF key and the values the search tries.
// values[0] is "", the key left unset (PyTorch's default).
type knob struct {
	key    string
	values []string
	// needsLimit: the key does nothing without a per-process memory limit
	// (garbage collection starts above a fraction of the limit).
	needsLimit bool
}

// knobs are every setting of PyTorch 2.11's native allocator that changes
// what it reserves, in the order the recommended line names them. The
// values span what users set: max_split_size_mb from a little above the
// 20 MiB large segment up to 1 GiB, the roundup divisions PyTorch's docs
// suggest as single values and as per-interval lists (keys in MiB),
// thresholds from 0.5 to 0.9, and segment sizes around the 20 MiB default.
// max_non_split_rounding_mb only matters with max_split_size_mb, which the
// descent reaches in combination. Values PyTorch rejects in a combination
// (max_split_size_mb below large_segment_size_mb) are skipped.
var knobs = []knob{
	{key: "expandable_segments", values: []string{"", "True"}},
	{key: "max_split_size_mb", values: []string{"", "32", "64", "128", "256", "512", "1024"}},
	{key: "roundup_power2_divisions", values: []string{"", "1", "2", "4", "8", "16",
		"[256:1,512:2,1024:4,>:8]", "[256:8,512:4,1024:2,>:1]"}},
	{key: "garbage_collection_threshold", values: []string{"", "0.5", "0.6", "0.7", "0.8", "0.9"}, needsLimit: true},
	{key: "max_non_split_rounding_mb", values: []string{"", "64", "256", "1024"}},
	{key: "large_segment_size_mb", values: []string{"", "12", "16", "32", "64"}},
}

// space is the knobs of one search: knobs, with the recorded settings'
// values added where the table lacks them, so that the search varies the
// run's own setting too.
type space []knob

// newSpace returns knobs with the values of rec (the recorded settings)
// that they lack appended.
func newSpace(rec allocator.Conf) space {
	const mib = 1 << 20
	d := allocator.DefaultConf()
	own := make([]string, len(knobs))
	if rec.MaxSplitSize != d.MaxSplitSize {
		own[1] = strconv.FormatInt(rec.MaxSplitSize/mib, 10)
	}
	if rec.RoundupDivisions != d.RoundupDivisions {
		own[2] = roundupValue(rec.RoundupDivisions)
	}
	if rec.GCThreshold != 0 {
		own[3] = strconv.FormatFloat(rec.GCThreshold, 'g', -1, 64)
	}
	if rec.MaxNonSplitRounding != rec.LargeSegmentSize {
		own[4] = strconv.FormatInt(rec.MaxNonSplitRounding/mib, 10)
	}
	if rec.LargeSegmentSize != d.LargeSegmentSize {
		own[5] = strconv.FormatInt(rec.LargeSegmentSize/mib, 10)
	}
	sp := make(space, len(knobs))
	for i, k := range knobs {
		k.values = slices.Clone(k.values)
		if own[i] != "" && !slices.Contains(k.values, own[i]) {
			k.values = append(k.values, own[i])
		}
		sp[i] = k
	}
	return sp
}

// roundupValue writes a roundup_power2_divisions table as PyTorch reads
// it: one number when every interval has it, else the list, each run of
// equal intervals once (the first key also covers the intervals below it,
// ">" those after the last key).
func roundupValue(div [16]int64) string {
	if !slices.ContainsFunc(div[:], func(v int64) bool { return v != div[0] }) {
		return strconv.FormatUint(uint64(div[0]), 10)
	}
	var parts []string
	for i := 0; i < len(div); {
		j := i
		for j+1 < len(div) && div[j+1] == div[i] {
			j++
		}
		key := strconv.FormatInt(1<<j, 10)
		if j == len(div)-1 {
			key = ">"
		}
		parts = append(parts, fmt.Sprintf("%s:%d", key, uint64(div[i])))
		i = j + 1
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// point is a setting of the search space: the index of each knob's value.
type point [6]uint8

// conf renders p as the PYTORCH_CUDA_ALLOC_CONF a user sets: its keys in
// knob order, "" for the defaults.
func (sp space) conf(p point) string {
	var parts []string
	for i, k := range sp {
		if p[i] != 0 {
			parts = append(parts, k.key+":"+k.values[p[i]])
		}
	}
	return strings.Join(parts, ",")
}

// keys counts the keys p sets: of two settings that do as well, the one
// with fewer keys is recommended.
func (p point) keys() int {
	n := 0
	for _, v := range p {
		if v != 0 {
			n++
		}
	}
	return n
}

// with returns p with knob k set to value v.
func (p point) with(k int, v uint8) point {
	p[k] = v
	return p
}

// valid reports whether PyTorch accepts p's string.
func (sp space) valid(p point) bool {
	_, err := allocator.ParseConf(sp.conf(p))
	return err == nil
}

// singles are the settings that set one knob, every value of each, in
// knob order; knobs that need a limit are left out without one.
func (sp space) singles(limited bool) []point {
	var out []point
	for k, kn := range sp {
		if kn.needsLimit && !limited {
			continue
		}
		for v := 1; v < len(kn.values); v++ {
			if p := (point{}).with(k, uint8(v)); sp.valid(p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// neighbours are the settings that differ from p in one knob, in knob and
// value order.
func (sp space) neighbours(p point, limited bool) []point {
	var out []point
	for k, kn := range sp {
		if kn.needsLimit && !limited {
			continue
		}
		for v := range kn.values {
			if uint8(v) == p[k] {
				continue
			}
			if q := p.with(k, uint8(v)); sp.valid(q) {
				out = append(out, q)
			}
		}
	}
	return out
}
