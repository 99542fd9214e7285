package allocator

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Unlimited is the MaxSplitSize of a Conf without max_split_size_mb: PyTorch's
// SIZE_MAX, reported by memory_stats()["max_split_size"] as -1.
const Unlimited int64 = math.MaxInt64

const mib = 1 << 20

// pageGranularity is the CUDA driver's physical allocation granularity on
// the GPUs PyTorch's expandable segments run on: every page they map is a
// multiple of it.
const pageGranularity = 2 * mib

// Conf is the allocator configuration: the keys of PYTORCH_CUDA_ALLOC_CONF
// (spec §16) plus the internal constants of §2, exposed so what-if replays can
// vary them. The zero Conf is not valid; start from DefaultConf or ParseConf.
type Conf struct {
	// MaxSplitSize is max_split_size_mb in bytes; Unlimited when unset.
	MaxSplitSize int64
	// MaxNonSplitRounding is max_non_split_rounding_mb in bytes (§5 rule R).
	MaxNonSplitRounding int64
	// GCThreshold is garbage_collection_threshold; 0 disables GC (§10).
	GCThreshold float64
	// RoundupDivisions is the roundup_power2_divisions table (§3.2). PyTorch
	// holds it as size_t: a division of 2^63 is held here as math.MinInt64,
	// and read as uint64.
	RoundupDivisions [16]int64
	// ExpandableSegments is expandable_segments (§9).
	ExpandableSegments bool
	// LargeSegmentSize is large_segment_size_mb in bytes (kLargeBuffer, 20 MiB).
	LargeSegmentSize int64
	// MemoryFraction is per_process_memory_fraction; 1 means no limit (§14).
	MemoryFraction float64
	// Backend is "native" or "cudaMallocAsync"; only native is modelled.
	Backend string

	// Keys accepted for fidelity with PyTorch's parser; no effect on the model.
	ReleaseLockOnCudaMalloc       bool
	PinnedUseHostRegister         bool
	PinnedNumRegisterThreads      int64
	PinnedUseBackgroundThreads    bool
	PinnedReserveSegmentSize      int64
	GraphCaptureRecordStreamReuse bool

	// Internal constants (§2), not PyTorch settings.

	// MinBlockSize is kMinBlockSize, the rounding quantum (512).
	MinBlockSize int64
	// SmallSize is kSmallSize: rounded requests up to it use the small pool (1 MiB).
	SmallSize int64
	// SmallBuffer is kSmallBuffer, the small-pool segment and page size (2 MiB).
	SmallBuffer int64
	// MinLargeAlloc is kMinLargeAlloc (10 MiB): smaller large requests get a
	// LargeSegmentSize segment.
	MinLargeAlloc int64
	// RoundLarge is kRoundLarge (2 MiB), the rounding of big segments.
	RoundLarge int64

	// Raw is the string ParseConf parsed, for labels and the snapshot's
	// allocator_settings.PYTORCH_CUDA_ALLOC_CONF.
	Raw string
}

// DefaultConf returns torch 2.11's defaults: no PYTORCH_CUDA_ALLOC_CONF.
func DefaultConf() Conf {
	return Conf{
		MaxSplitSize:             Unlimited,
		MaxNonSplitRounding:      20 * mib,
		LargeSegmentSize:         20 * mib,
		MemoryFraction:           1,
		Backend:                  "native",
		PinnedNumRegisterThreads: 1,
		MinBlockSize:             512,
		SmallSize:                1 * mib,
		SmallBuffer:              2 * mib,
		MinLargeAlloc:            10 * mib,
		RoundLarge:               2 * mib,
	}
}

// ConfError is a configuration PyTorch would reject; Msg is its message.
type ConfError struct{ Msg string }

func (e *ConfError) Error() string { return "allocator: " + e.Msg }

func confErr(format string, args ...any) error {
	return &ConfError{Msg: fmt.Sprintf(format, args...)}
}

// tokenize splits as c10's ConfigTokenizer: ',', ':', '[' and ']' are tokens
// of their own, whitespace separates and is dropped.
func tokenize(s string) []string {
	var toks []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			toks = append(toks, cur.String())
			cur.Reset()
		}
	}
	for _, r := range s {
		switch {
		case r == ',' || r == ':' || r == '[' || r == ']':
			flush()
			toks = append(toks, string(r))
		case r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f':
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return toks
}

type tokenizer struct{ t []string }

func (z *tokenizer) at(i int) (string, error) {
	if i < 0 || i >= len(z.t) {
		return "", confErr("Index out of bounds in ConfigTokenizer")
	}
	return z.t[i], nil
}

// uint is toSizeT: std::stoull of token i.
func (z *tokenizer) uint(i int) (uint64, error) {
	s, err := z.at(i)
	if err != nil {
		return 0, err
	}
	v, ne := cStoull(s)
	if ne != nil {
		return 0, convErr("stoull", s, i, ne)
	}
	return v, nil
}

// float is toDouble: std::stod of token i.
func (z *tokenizer) float(i int) (float64, error) {
	s, err := z.at(i)
	if err != nil {
		return 0, err
	}
	v, ne := cStod(s)
	if ne != nil {
		return 0, convErr("stod", s, i, ne)
	}
	return v, nil
}

// convErr is the exception std::stoull or std::stod throws, with the token.
func convErr(fn, s string, i int, ne *numErr) error {
	if ne.rangeErr {
		return confErr("%s: value '%s' at index %d is out of range", fn, s, i)
	}
	return confErr("%s: invalid value '%s' at index %d", fn, s, i)
}

func (z *tokenizer) boolean(i int) (bool, error) {
	s, err := z.at(i)
	if err != nil {
		return false, err
	}
	switch s {
	case "True":
		return true, nil
	case "False":
		return false, nil
	}
	return false, confErr("Expected 'True' or 'False' at index %d in ConfigTokenizer but got '%s'", i, s)
}

func isPow2(v int64) bool { return v > 0 && v&(v-1) == 0 }

func isPow2u(v uint64) bool { return v != 0 && v&(v-1) == 0 }

// mbToBytes is PyTorch's MB-to-bytes conversion: values above SIZE_MAX/MiB
// are clamped to it, which here (sizes are int64) is Unlimited.
func mbToBytes(v uint64) int64 {
	if v > math.MaxInt64/mib {
		return Unlimited
	}
	return int64(v) * mib
}

// maxSegmentMB is the largest size in MiB whose bytes an int64 holds.
const maxSegmentMB = math.MaxInt64 / mib

// clampMB converts MiB to bytes for the sizes other than max_split_size_mb,
// clamped to maxSegmentMB as PyTorch clamps to SIZE_MAX/MiB: Conf.String
// writes the clamped value back exactly.
func clampMB(v uint64) int64 { return int64(min(v, maxSegmentMB)) * mib }

// ParseConf parses a PYTORCH_CUDA_ALLOC_CONF string as torch 2.11 does,
// starting from DefaultConf, with PyTorch's validation and messages (§16). As in
// 2.11, separators are lenient: the token after a key and after a value is
// skipped whatever it is. Numbers are read as std::stoull and std::stod read
// them (cStoull, cStod): "64MB" is 64 and "-1" is 2^64-1. The empty string
// gives DefaultConf.
func ParseConf(s string) (Conf, error) {
	c := DefaultConf()
	c.Raw = s
	z := &tokenizer{t: tokenize(s)}
	// large_segment_size_mb is read in a first pass: it sets the default of
	// max_non_split_rounding and the minimum of max_split_size_mb.
	for i := 0; i+2 < len(z.t); i++ {
		if z.t[i] == "large_segment_size_mb" {
			v, err := z.uint(i + 2)
			if err != nil {
				return c, err
			}
			if v <= 10 {
				return c, confErr("CachingAllocator option large_segment_size_mb must be > 10 MB")
			}
			c.LargeSegmentSize = clampMB(v)
		}
	}
	c.MaxNonSplitRounding = c.LargeSegmentSize
	for i := 0; i < len(z.t); i++ {
		key := z.t[i]
		var err error
		i++ // the ':' after the key, not checked (2.11 ignores checkToken)
		switch key {
		case "max_split_size_mb":
			var v uint64
			if v, err = z.uint(i + 1); err == nil {
				i++
				least := uint64(c.LargeSegmentSize / mib)
				if v < least {
					err = confErr("CachingAllocator option max_split_size_mb too small, must be >= %d", least)
				}
				c.MaxSplitSize = mbToBytes(v)
			}
		case "max_non_split_rounding_mb":
			var v uint64
			if v, err = z.uint(i + 1); err == nil {
				i++
				// As max_split_size_mb: at least large_segment_size_mb (20).
				least := uint64(c.LargeSegmentSize / mib)
				if v < least {
					err = confErr("CachingAllocator option max_non_split_rounding_mb too small, must be >= %d", least)
				}
				c.MaxNonSplitRounding = clampMB(v)
			}
		case "garbage_collection_threshold":
			var v float64
			if v, err = z.float(i + 1); err == nil {
				i++
				if !(v > 0 && v < 1) { // NaN too, as PyTorch's check
					err = confErr("garbage_collect_threshold is invalid, set it in (0.0, 1.0)")
				}
				c.GCThreshold = v
			}
		case "roundup_power2_divisions":
			i, err = parseRoundup(z, i+1, &c.RoundupDivisions)
		case "expandable_segments":
			c.ExpandableSegments, err = z.boolean(i + 1)
			i++
		case "large_segment_size_mb":
			_, err = z.uint(i + 1) // validated in the first pass
			i++
		case "per_process_memory_fraction":
			var v float64
			if v, err = z.float(i + 1); err == nil {
				i++
				if !(v >= 0 && v <= 1) {
					err = confErr("per_process_memory_fraction is invalid, set it in [0.0, 1.0]")
				}
				c.MemoryFraction = v
			}
		case "backend":
			var v string
			if v, err = z.at(i + 1); err == nil {
				i++
				if v != "native" && v != "cudaMallocAsync" {
					err = confErr("Unknown allocator backend, options are native and cudaMallocAsync")
				}
				c.Backend = v
			}
		case "release_lock_on_cudamalloc", "release_lock_on_hipmalloc":
			c.ReleaseLockOnCudaMalloc, err = z.boolean(i + 1)
			i++
		case "pinned_use_cuda_host_register", "pinned_use_hip_host_register":
			c.PinnedUseHostRegister, err = z.boolean(i + 1)
			i++
		case "pinned_use_background_threads":
			c.PinnedUseBackgroundThreads, err = z.boolean(i + 1)
			i++
		case "graph_capture_record_stream_reuse":
			c.GraphCaptureRecordStreamReuse, err = z.boolean(i + 1)
			i++
		case "pinned_num_register_threads":
			var v uint64
			if v, err = z.uint(i + 1); err == nil {
				i++
				if !isPow2u(v) {
					err = confErr("Number of register threads has to be power of 2, got %d", v)
				} else if v > 128 {
					err = confErr("Number of register threads should be less than or equal to 128, got %d", v)
				}
				c.PinnedNumRegisterThreads = int64(v)
			}
		case "pinned_reserve_segment_size_mb":
			var v uint64
			if v, err = z.uint(i + 1); err == nil {
				i++
				if v == 0 {
					err = confErr("Pinned reserve segment size has to be greater than 0")
				}
				c.PinnedReserveSegmentSize = clampMB(v)
			}
		default:
			err = confErr("Unrecognized key '%s' in CUDA allocator config.", key)
		}
		if err != nil {
			return c, err
		}
		i++ // the ',' after the value, not checked either
	}
	return c, c.Validate()
}

// parseRoundup parses the value of roundup_power2_divisions starting at token
// i and returns the index of its last token. The list form follows 2.11: the
// first key also fills every lower interval, '>' fills the intervals after
// the last key.
func parseRoundup(z *tokenizer, i int, div *[16]int64) (int, error) {
	tok, err := z.at(i)
	if err != nil {
		return i, err
	}
	if tok != "[" {
		v, err := z.uint(i)
		if err != nil {
			return i, err
		}
		if !isPow2u(v) {
			return i, confErr("For roundups, the divisions has to be power of 2")
		}
		for k := range div {
			div[k] = int64(v)
		}
		return i, nil
	}
	last, first := 0, true
	for {
		i++
		k, err := z.at(i)
		if err != nil {
			return i, err
		}
		if k == "]" {
			return i, nil
		}
		i++ // ':'
		i++
		v, err := z.uint(i)
		if err != nil {
			return i, err
		}
		if v != 0 && !isPow2u(v) {
			return i, confErr("For roundups, the divisions has to be power of 2 or 0 to disable roundup")
		}
		dv := int64(v) // 2^63 wraps, as RoundupDivisions documents
		if k == ">" {
			for j := last + 1; j < len(div); j++ {
				div[j] = dv
			}
		} else {
			kv, ne := cStoull(k)
			if ne != nil {
				return i, convErr("stoull", k, i-2, ne)
			}
			if kv == 0 || kv&(kv-1) != 0 {
				return i, confErr("For roundups, the intervals have to be power of 2")
			}
			idx := min(bits.Len64(kv)-1, len(div)-1)
			if first {
				for j := 0; j < idx; j++ {
					div[j] = dv
				}
				first = false
			}
			div[idx] = dv
			last = idx
		}
		if n, err := z.at(i + 1); err == nil && n != "]" {
			i++ // ','
		}
	}
}

// Validate reports settings the model cannot run with: a quantum that is not
// a power of two, or size constants out of order.
func (c *Conf) Validate() error {
	switch {
	case !isPow2(c.MinBlockSize):
		return confErr("rounding quantum %d is not a power of two", c.MinBlockSize)
	case c.SmallSize < c.MinBlockSize || c.SmallSize%c.MinBlockSize != 0:
		return confErr("small-request limit %d must be a multiple of the quantum %d", c.SmallSize, c.MinBlockSize)
	case c.SmallBuffer < c.SmallSize || c.SmallBuffer%c.MinBlockSize != 0:
		return confErr("small segment size %d must be >= the small-request limit %d and a multiple of the quantum", c.SmallBuffer, c.SmallSize)
	case c.RoundLarge < c.MinBlockSize || c.RoundLarge%c.MinBlockSize != 0:
		return confErr("large rounding %d must be a multiple of the quantum %d", c.RoundLarge, c.MinBlockSize)
	case c.MinLargeAlloc < c.SmallSize:
		return confErr("min large alloc %d must be >= the small-request limit %d", c.MinLargeAlloc, c.SmallSize)
	case c.LargeSegmentSize < c.MinLargeAlloc || c.LargeSegmentSize%c.MinBlockSize != 0:
		return confErr("large segment size %d must be >= min large alloc %d and a multiple of the quantum %d", c.LargeSegmentSize, c.MinLargeAlloc, c.MinBlockSize)
	case c.ExpandableSegments && c.LargeSegmentSize%pageGranularity != 0:
		// PyTorch accepts such a size, and its first cuMemCreate of a
		// page fails with a driver error (not an out-of-memory).
		return confErr("expandable segments map pages of large_segment_size_mb, which must be a multiple of the driver's 2 MiB granularity: cuMemCreate fails on a page of %d bytes", c.LargeSegmentSize)
	case c.MaxSplitSize <= 0 || c.MaxNonSplitRounding <= 0:
		return confErr("max_split_size and max_non_split_rounding must be positive")
	case !(c.MemoryFraction >= 0 && c.MemoryFraction <= 1):
		return confErr("per_process_memory_fraction is invalid, set it in [0.0, 1.0]")
	case c.GCThreshold != 0 && !(c.GCThreshold > 0 && c.GCThreshold < 1):
		return confErr("garbage_collect_threshold is invalid, set it in (0.0, 1.0)")
	}
	return nil
}

// Modelled reports whether the model stands for the allocator c configures:
// tracer models PyTorch's native caching allocator only, not the
// cudaMallocAsync backend, whose blocks, segments and statistics are the
// CUDA driver's memory pool's.
func (c *Conf) Modelled() error {
	if c.Backend != "native" {
		return confErr("tracer models PyTorch's native caching allocator only, not backend:%s", c.Backend)
	}
	return nil
}

// String renders c as a PYTORCH_CUDA_ALLOC_CONF string listing the settings
// that differ from the defaults (model constants as extra "tracer_*" keys,
// which ParseConf does not accept). "" is the default configuration.
func (c Conf) String() string {
	d := DefaultConf()
	var parts []string
	add := func(f string, a ...any) { parts = append(parts, fmt.Sprintf(f, a...)) }
	if c.ExpandableSegments {
		add("expandable_segments:True")
	}
	if c.MaxSplitSize != Unlimited {
		add("max_split_size_mb:%d", c.MaxSplitSize/mib)
	}
	if c.LargeSegmentSize != d.LargeSegmentSize {
		add("large_segment_size_mb:%d", c.LargeSegmentSize/mib)
	}
	if c.MaxNonSplitRounding != c.LargeSegmentSize {
		add("max_non_split_rounding_mb:%d", c.MaxNonSplitRounding/mib)
	}
	if c.GCThreshold != 0 {
		add("garbage_collection_threshold:%g", c.GCThreshold)
	}
	if c.RoundupDivisions != d.RoundupDivisions {
		same := true
		for _, v := range c.RoundupDivisions {
			same = same && v == c.RoundupDivisions[0]
		}
		if same {
			add("roundup_power2_divisions:%d", uint64(c.RoundupDivisions[0]))
		} else {
			var l []string
			for i, v := range c.RoundupDivisions {
				l = append(l, fmt.Sprintf("%d:%d", 1<<i, uint64(v)))
			}
			add("roundup_power2_divisions:[%s]", strings.Join(l, ","))
		}
	}
	if c.MemoryFraction != 1 {
		add("per_process_memory_fraction:%g", c.MemoryFraction)
	}
	// Keys with no effect on the model, so that the string parses back
	// to c.
	if c.Backend != d.Backend {
		add("backend:%s", c.Backend)
	}
	boolKey := func(k string, v bool) {
		if v {
			add("%s:True", k)
		}
	}
	boolKey("release_lock_on_cudamalloc", c.ReleaseLockOnCudaMalloc)
	boolKey("pinned_use_cuda_host_register", c.PinnedUseHostRegister)
	boolKey("pinned_use_background_threads", c.PinnedUseBackgroundThreads)
	boolKey("graph_capture_record_stream_reuse", c.GraphCaptureRecordStreamReuse)
	if c.PinnedNumRegisterThreads != d.PinnedNumRegisterThreads {
		add("pinned_num_register_threads:%d", c.PinnedNumRegisterThreads)
	}
	if c.PinnedReserveSegmentSize != d.PinnedReserveSegmentSize {
		add("pinned_reserve_segment_size_mb:%d", c.PinnedReserveSegmentSize/mib)
	}
	if c.MinBlockSize != d.MinBlockSize {
		add("tracer_round:%d", c.MinBlockSize)
	}
	return strings.Join(parts, ",")
}
