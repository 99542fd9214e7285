package allocator

import (
	"fmt"
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
