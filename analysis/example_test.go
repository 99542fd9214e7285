package analysis_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/trace"
)

// A segment, two blocks, one freed: the peaks and fragmentation measures.
func ExampleSummarizer() {
	events := []trace.Event{
		{Kind: trace.KindSegmentAlloc, Addr: 0x7f0000000000, Size: 20 << 20},
		{Kind: trace.KindAlloc, Addr: 0x7f0000000000, Size: 6_000_000, BlockSize: 6_000_128, Stack: 0},
		{Kind: trace.KindAlloc, Addr: 0x7f00005b8e00, Size: 3 << 20, BlockSize: 3 << 20, Stack: 1},
		{Kind: trace.KindFreeRequested, Addr: 0x7f0000000000, Size: 6_000_000},
		{Kind: trace.KindFreeCompleted, Addr: 0x7f0000000000, Size: 6_000_000},
	}
	s := analysis.NewSummarizer(analysis.Options{})
	for i := range events {
		events[i].Seq = int64(i)
		s.Event(&events[i])
	}
	sum := s.Finalize()
	fmt.Println("allocated peak:", sum.Peaks.Allocated.Bytes, "at event", sum.Peaks.Allocated.Seq)
	fmt.Println("reserved peak:", sum.Peaks.Reserved.Bytes)
	fmt.Println("unused at the reserved peak:", sum.Fragmentation.ExternalAtReservedPeak)
	fmt.Println("inactive split now:", analysis.Bytes(sum.Stats["inactive_split_bytes.all.current"]))
	fmt.Printf("GMLake: %.1f%%\n", 100*sum.Fragmentation.GMLake)
	fmt.Println("largest site at the peak: stack", sum.Sites[0].Stack, sum.Sites[0].BlockBytes)
	// Output:
	// allocated peak: 8.7 MiB at event 2
	// reserved peak: 20.0 MiB
	// unused at the reserved peak: 11.3 MiB
	// inactive split now: 17.0 MiB
	// GMLake: 56.4%
	// largest site at the peak: stack 0 5.7 MiB
}

// Summaries encode to JSON with byte counts as integers.
func TestSummary_JSON(t *testing.T) {
	sum := syntheticSummary(20_000)
	b, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Peaks struct {
			Allocated struct {
				Bytes int64 `json:"bytes"`
			} `json:"allocated"`
		} `json:"peaks"`
		Stats map[string]int64 `json:"stats"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Peaks.Allocated.Bytes != int64(sum.Peaks.Allocated.Bytes) || back.Stats["num_ooms"] != sum.Stats["num_ooms"] {
		t.Errorf("JSON round trip lost values: %+v", back)
	}
}
