package allocator

import (
	"fmt"
	"math"
	"testing"
)

func ExampleParseConf() {
	c, err := ParseConf("expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.ExpandableSegments, c.MaxSplitSize>>20, c.RoundupDivisions)
	_, err = ParseConf("max_split_size_mb:10")
	fmt.Println(err)
	_, err = ParseConf("expandable_segments:true")
	fmt.Println(err)
	// Output:
	// true 128 [1 1 1 1 1 1 1 1 1 2 4 8 8 8 8 8]
	// allocator: CachingAllocator option max_split_size_mb too small, must be >= 20
	// allocator: Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'
}

func TestParseConf(t *testing.T) {
	for _, tc := range []struct {
		in  string
		err string
		chk func(Conf) bool
	}{
		{in: "", chk: func(c Conf) bool { return c.MaxSplitSize == Unlimited && c.LargeSegmentSize == 20*mib }},
		{in: "max_split_size_mb:20", chk: func(c Conf) bool { return c.MaxSplitSize == 20*mib }},
		{in: "max_split_size_mb:19", err: "allocator: CachingAllocator option max_split_size_mb too small, must be >= 20"},
		{in: "large_segment_size_mb:30,max_split_size_mb:20", err: "allocator: CachingAllocator option max_split_size_mb too small, must be >= 30"},
		{in: "max_split_size_mb:20,large_segment_size_mb:30", err: "allocator: CachingAllocator option max_split_size_mb too small, must be >= 30"},
		{in: "large_segment_size_mb:30", chk: func(c Conf) bool { return c.LargeSegmentSize == 30*mib && c.MaxNonSplitRounding == 30*mib }},
		{in: "large_segment_size_mb:10", err: "allocator: CachingAllocator option large_segment_size_mb must be > 10 MB"},
		{in: "max_non_split_rounding_mb:19", err: "allocator: CachingAllocator option max_non_split_rounding_mb too small, must be >= 20"},
		{in: "max_non_split_rounding_mb:64", chk: func(c Conf) bool { return c.MaxNonSplitRounding == 64*mib }},
		{in: "large_segment_size_mb:30,max_non_split_rounding_mb:25", err: "allocator: CachingAllocator option max_non_split_rounding_mb too small, must be >= 30"},
		{in: "large_segment_size_mb:12,max_non_split_rounding_mb:15", chk: func(c Conf) bool { return c.MaxNonSplitRounding == 15*mib }},
		{in: "garbage_collection_threshold:1.0", err: "allocator: garbage_collect_threshold is invalid, set it in (0.0, 1.0)"},
		{in: "garbage_collection_threshold:0.6", chk: func(c Conf) bool { return c.GCThreshold == 0.6 }},
		{in: "roundup_power2_divisions:3", err: "allocator: For roundups, the divisions has to be power of 2"},
		{in: "roundup_power2_divisions:[64:3]", err: "allocator: For roundups, the divisions has to be power of 2 or 0 to disable roundup"},
		{in: "roundup_power2_divisions:[63:4]", err: "allocator: For roundups, the intervals have to be power of 2"},
		{in: "roundup_power2_divisions:[64:0,>:4]", chk: func(c Conf) bool {
			return c.RoundupDivisions == [16]int64{0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4, 4}
		}},
		{in: "roundup_power2_divisions:[1:2,4:8]", chk: func(c Conf) bool {
			return c.RoundupDivisions == [16]int64{2, 0, 8}
		}},
		{in: "expandable_segments:False", chk: func(c Conf) bool { return !c.ExpandableSegments }},
		{in: "expandable_segments,True", chk: func(c Conf) bool { return c.ExpandableSegments }},
		{in: " expandable_segments : True , max_split_size_mb : 64 ", chk: func(c Conf) bool { return c.ExpandableSegments && c.MaxSplitSize == 64*mib }},
		{in: "expandable_segments:", err: "allocator: Index out of bounds in ConfigTokenizer"},
		{in: "bogus:1", err: "allocator: Unrecognized key 'bogus' in CUDA allocator config."},
		{in: "throw_on_cudamalloc_oom:True", err: "allocator: Unrecognized key 'throw_on_cudamalloc_oom' in CUDA allocator config."},
		{in: "backend:foo", err: "allocator: Unknown allocator backend, options are native and cudaMallocAsync"},
		{in: "backend:native,release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,pinned_num_register_threads:8,pinned_use_background_threads:True,pinned_reserve_segment_size_mb:64,graph_capture_record_stream_reuse:True",
			chk: func(c Conf) bool { return c.PinnedNumRegisterThreads == 8 && c.ReleaseLockOnCudaMalloc }},
		{in: "pinned_num_register_threads:3", err: "allocator: Number of register threads has to be power of 2, got 3"},
		{in: "pinned_num_register_threads:256", err: "allocator: Number of register threads should be less than or equal to 128, got 256"},
		{in: "pinned_reserve_segment_size_mb:0", err: "allocator: Pinned reserve segment size has to be greater than 0"},
		{in: "per_process_memory_fraction:1.5", err: "allocator: per_process_memory_fraction is invalid, set it in [0.0, 1.0]"},
		{in: "per_process_memory_fraction:0.25", chk: func(c Conf) bool { return c.MemoryFraction == 0.25 }},
		// Values go through std::stoull and std::stod, whose ranges and
		// prefixes PyTorch takes as they are.
		{in: "garbage_collection_threshold:nan", err: "allocator: garbage_collect_threshold is invalid, set it in (0.0, 1.0)"},
		{in: "garbage_collection_threshold:-nan", err: "allocator: garbage_collect_threshold is invalid, set it in (0.0, 1.0)"},
		{in: "per_process_memory_fraction:NaN", err: "allocator: per_process_memory_fraction is invalid, set it in [0.0, 1.0]"},
		{in: "garbage_collection_threshold:1e-400", err: "allocator: stod: value '1e-400' at index 2 is out of range"},
		{in: "per_process_memory_fraction:1e999", err: "allocator: stod: value '1e999' at index 2 is out of range"},
		{in: "garbage_collection_threshold:x", err: "allocator: stod: invalid value 'x' at index 2"},
		{in: "garbage_collection_threshold:0x1p-1", chk: func(c Conf) bool { return c.GCThreshold == 0.5 }},
		{in: "garbage_collection_threshold:.25abc", chk: func(c Conf) bool { return c.GCThreshold == 0.25 }},
		{in: "max_split_size_mb:18446744073709551616", err: "allocator: stoull: value '18446744073709551616' at index 2 is out of range"},
		{in: "max_split_size_mb:99999999999999999999999", err: "allocator: stoull: value '99999999999999999999999' at index 2 is out of range"},
		{in: "max_split_size_mb:18446744073709551615", chk: func(c Conf) bool { return c.MaxSplitSize == Unlimited }},
		{in: "max_split_size_mb:-1", chk: func(c Conf) bool { return c.MaxSplitSize == Unlimited }}, // 2^64-1
		{in: "max_split_size_mb:64MB", chk: func(c Conf) bool { return c.MaxSplitSize == 64*mib }},
		{in: "max_split_size_mb:-", err: "allocator: stoull: invalid value '-' at index 2"},
		{in: "large_segment_size_mb:21", chk: func(c Conf) bool { return c.LargeSegmentSize == 21*mib }},
		{in: "large_segment_size_mb:21,expandable_segments:True", err: "allocator: expandable segments map pages of large_segment_size_mb, which must be a multiple of the driver's 2 MiB granularity: cuMemCreate fails on a page of 22020096 bytes"},
		{in: "large_segment_size_mb:18446744073709551615", chk: func(c Conf) bool { return c.LargeSegmentSize == maxSegmentMB*mib }},
		{in: "expandable_segments:True,large_segment_size_mb:100000", chk: func(c Conf) bool { return c.LargeSegmentSize == 100000*mib }},
		{in: "roundup_power2_divisions:9223372036854775808", chk: func(c Conf) bool { return c.RoundupDivisions[3] == math.MinInt64 }},
		{in: "roundup_power2_divisions:[-1:2]", err: "allocator: For roundups, the intervals have to be power of 2"},
		{in: "pinned_num_register_threads:-1", err: "allocator: Number of register threads has to be power of 2, got 18446744073709551615"},
	} {
		c, err := ParseConf(tc.in)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("ParseConf(%q) error = %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ParseConf(%q): %v", tc.in, err)
		case tc.chk != nil && err == nil && !tc.chk(c):
			t.Errorf("ParseConf(%q) = %+v", tc.in, c)
		}
	}
}

func TestConfValidate(t *testing.T) {
	c := DefaultConf()
	c.MinBlockSize = 500
	if c.Validate() == nil {
		t.Error("quantum 500 accepted")
	}
	c = DefaultConf()
	c.SmallBuffer = c.SmallSize / 2
	if c.Validate() == nil {
		t.Error("small buffer below small size accepted")
	}
	for _, bad := range []func(*Conf){
		func(c *Conf) { c.GCThreshold = math.NaN() },
		func(c *Conf) { c.MemoryFraction = math.NaN() },
		func(c *Conf) { c.ExpandableSegments, c.LargeSegmentSize = true, 21*mib },
	} {
		c = DefaultConf()
		bad(&c)
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	c = DefaultConf()
	c.MinBlockSize = 4096
	if err := c.Validate(); err != nil {
		t.Errorf("quantum 4096: %v", err)
	}
}

func TestConfString(t *testing.T) {
	for _, s := range []string{"", "expandable_segments:True,max_split_size_mb:64", "roundup_power2_divisions:8", "garbage_collection_threshold:0.5"} {
		c, err := ParseConf(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.String(); got != s {
			t.Errorf("String of %q = %q", s, got)
		}
	}
}

// TestConfStringAll: every key that ParseConf accepts is written back by
// String (the keys without effect on the model included), and the string
// parses to the same Conf.
func TestConfStringAll(t *testing.T) {
	in := "expandable_segments:True,max_split_size_mb:40,large_segment_size_mb:30,max_non_split_rounding_mb:64," +
		"garbage_collection_threshold:0.3,roundup_power2_divisions:[1:2,>:4],per_process_memory_fraction:0.5," +
		"backend:cudaMallocAsync,release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True," +
		"pinned_use_background_threads:True,graph_capture_record_stream_reuse:True,pinned_num_register_threads:8," +
		"pinned_reserve_segment_size_mb:64"
	c, err := ParseConf(in)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ParseConf(c.String())
	if err != nil {
		t.Fatalf("ParseConf(%q): %v", c.String(), err)
	}
	c.Raw, c2.Raw = "", ""
	if c != c2 {
		t.Errorf("%q parsed back as\n%+v, want\n%+v", c.String(), c2, c)
	}
}

// FuzzParseConf: ParseConf never panics, and a Conf it accepts is written
// by String as a string that parses back to the same Conf.
func FuzzParseConf(f *testing.F) {
	for _, s := range []string{"", "expandable_segments:True,large_segment_size_mb:100000", "max_split_size_mb:-1",
		"garbage_collection_threshold:nan", "roundup_power2_divisions:[64:0,>:9223372036854775808]",
		"per_process_memory_fraction:0x1p-2", "large_segment_size_mb:18446744073709551615,max_non_split_rounding_mb:99999999999999",
		"backend:cudaMallocAsync,pinned_num_register_threads:128", "max_split_size_mb:1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConf(s)
		if err != nil {
			return
		}
		out := c.String()
		c2, err := ParseConf(out)
		if err != nil {
			t.Fatalf("ParseConf(%q) = %+v; its String %q: %v", s, c, out, err)
		}
		c.Raw, c2.Raw = "", ""
		if c != c2 {
			t.Fatalf("ParseConf(%q) = %+v; its String %q parses to %+v", s, c, out, c2)
		}
	})
}

// TestCNum checks the std::stoull and std::stod stand-ins on the prefixes
// and ranges strtoull and strtod have.
func TestCNum(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		bad  bool
	}{{"42", 42, false}, {"+7x", 7, false}, {"-1", 1<<64 - 1, false}, {"-0", 0, false}, {"18446744073709551615", 1<<64 - 1, false},
		{"18446744073709551616", 0, true}, {"x1", 0, true}, {"", 0, true}, {"+", 0, true}} {
		v, ne := cStoull(tc.in)
		if (ne != nil) != tc.bad || v != tc.want {
			t.Errorf("cStoull(%q) = %d, %v", tc.in, v, ne)
		}
	}
	for _, tc := range []struct {
		in   string
		want float64
		bad  bool
	}{{"0.5", 0.5, false}, {"5.", 5, false}, {".5e1x", 5, false}, {"1e", 1, false}, {"1e+", 1, false}, {"0x", 0, false},
		{"0x1.8", 1.5, false}, {"0X.8P1", 1, false}, {"-INF", math.Inf(-1), false}, {"infinity", math.Inf(1), false},
		{"1e-310", 0, true}, {"1e309", 0, true}, {"0e999999", 0, false}, {".", 0, true}, {"e5", 0, true}, {"-", 0, true}} {
		v, ne := cStod(tc.in)
		if (ne != nil) != tc.bad || v != tc.want {
			t.Errorf("cStod(%q) = %g, %v", tc.in, v, ne)
		}
	}
	if v, ne := cStod("nan(123)"); ne != nil || !math.IsNaN(v) {
		t.Errorf("cStod(nan(123)) = %g, %v", v, ne)
	}
}

// TestFractionZero: per_process_memory_fraction:0, which PyTorch accepts,
// allows no memory: every request that needs a segment is an OOM (it was
// taken as no limit).
func TestFractionZero(t *testing.T) {
	for _, s := range []string{"per_process_memory_fraction:0", "per_process_memory_fraction:1e-300", "per_process_memory_fraction:0,expandable_segments:True"} {
		conf, err := ParseConf(s)
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(conf, NewSimDevice(80<<30))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Malloc(512, 0); !IsOOM(err) {
			t.Errorf("%s: Malloc(512) = %v, want an OOM", s, err)
		}
	}
}
