package record

import (
	"strings"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/record/torchsnap"
)

// TestDecodeParts: the decode's report is cut at the regions' spans into
// sequential and parallel parts that tile the file's bytes and the
// decode's wall and CPU, and the blocks' workers' CPU and the decoder's
// own before the first region follow them.
func TestDecodeParts(t *testing.T) {
	var got []ImportStage
	timer := stageTimer{in: "f", on: func(s ImportStage) { got = append(got, s) }}
	t0 := time.Unix(100, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	c := stageClock{start: ms(0), cpu0: 5 * time.Second, thread: true, thread0: time.Second}
	decode := ImportStage{Start: ms(0), End: ms(100), CPU: 400 * time.Millisecond}
	spans := []torchsnap.RegionSpan{
		{Off: 30, End: 70, Start: ms(20), Stop: ms(60), StartCPU: 5020 * time.Millisecond, StopCPU: 5300 * time.Millisecond, StartThread: 1015 * time.Millisecond},
		{Off: 75, End: 95, Start: ms(62), Stop: ms(90), StartCPU: 5302 * time.Millisecond, StopCPU: 5390 * time.Millisecond},
	}
	timer.decodeParts(c, decode, spans, torchsnap.AheadSpan{Off: 10, End: 28, CPU: 12 * time.Millisecond, Batches: 3}, 100)
	want := []string{
		"decode, sequential, bytes 0-30 20ms 0s-20ms",
		"decode, parallel, bytes 30-70 280ms 20ms-60ms",
		"decode, sequential, bytes 70-75 2ms 60ms-62ms",
		"decode, parallel, bytes 75-95 88ms 62ms-90ms",
		"decode, sequential, bytes 95-100 10ms 90ms-100ms",
		"decode, blocks ahead, bytes 10-28, 3 batches 12ms 0s-100ms",
		"decode, the decoder's thread, bytes 0-30 15ms 0s-20ms",
	}
	var lines []string
	for _, s := range got {
		lines = append(lines, s.Name+" "+s.CPU.String()+" "+s.Start.Sub(t0).String()+"-"+s.End.Sub(t0).String())
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("parts:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	got = nil
	timer.decodeParts(c, decode, nil, torchsnap.AheadSpan{}, 100)
	if len(got) != 0 {
		t.Errorf("a decode without regions reported %d parts", len(got))
	}
}
