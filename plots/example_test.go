package plots_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/analysis/analysistest"
	"github.com/tracer-dev/tracer/plots"
	"github.com/tracer-dev/tracer/record/sample"
	"github.com/tracer-dev/tracer/replay"
	"github.com/tracer-dev/tracer/trace"
)

// fakeStacks names synthetic sites like a model's Python frames.
func fakeStacks(id trace.StackID) trace.Stack {
	return trace.Stack{
		{Name: fmt.Sprintf("layer%d.forward", id), File: "/src/model/blocks.py", Line: int32(100 + id)},
		{Name: "forward", File: "/src/model/model.py", Line: 42},
	}
}

var (
	once sync.Once
	demo *analysis.Summary
)

// summary is a deterministic synthetic training run of 200k events.
func summary() *analysis.Summary {
	once.Do(func() {
		s := analysis.NewSummarizer(analysis.Options{Stacks: fakeStacks})
		analysistest.Training(11, 200_000, s.Event)
		demo = s.Finalize()
	})
	return demo
}

func ExamplePeak() {
	p, err := plots.Peak(summary(), plots.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/peak.png"); err != nil {
		log.Fatal(err)
	}
}

func ExampleFragmentation() {
	p, err := plots.Fragmentation(summary(), plots.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/fragmentation.png"); err != nil {
		log.Fatal(err)
	}
}

func ExampleFragmentationRatio() {
	p, err := plots.FragmentationRatio(summary(), plots.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/fragmentation_ratio.png"); err != nil {
		log.Fatal(err)
	}
}

func ExampleSegments() {
	p, err := plots.Segments(summary(), plots.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/segments.png"); err != nil {
		log.Fatal(err)
	}
}

// ExampleCompare puts three runs on one chart. Until replay is wired into
// these tests, the runs are synthetic streams of different seeds standing
// in for a recording and two replays with other settings.
func ExampleCompare() {
	var runs []plots.Run
	for i, label := range []string{"recorded", "expandable_segments:True", "--round 4096"} {
		s := analysis.NewSummarizer(analysis.Options{})
		analysistest.Training(uint64(21+i), 100_000, s.Event)
		runs = append(runs, plots.Run{Label: label, Summary: s.Finalize()})
	}
	p, err := plots.Compare(runs, plots.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/compare.png"); err != nil {
		log.Fatal(err)
	}
}

// replayed summarises the built-in real trace (a 6-layer MLP trained with
// Adam on an H100) replayed under conf, or as recorded when conf is "recorded".
func replayed(conf string) *analysis.Summary {
	rd, err := sample.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer rd.Close()
	s := analysis.NewSummarizer(analysis.Options{Stacks: rd.Stack, Annotations: rd.Meta().Annotations})
	if conf == "recorded" {
		for rd.Next() {
			s.Event(rd.Event())
		}
		return s.Finalize()
	}
	c, err := allocator.ParseConf(conf)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := replay.Run(context.Background(), rd, replay.Options{Conf: c, Recorded: conf == ""}, s); err != nil {
		log.Fatal(err)
	}
	return s.Finalize()
}

func ExamplePeak_mlpTrain() {
	// This run idles 5 s before training: the event index shows it better.
	p, err := plots.Peak(replayed(""), plots.Options{ByEvent: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/peak_mlp_train.png"); err != nil {
		log.Fatal(err)
	}
}

func ExampleSegments_mlpTrain() {
	p, err := plots.Segments(replayed(""), plots.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/segments_mlp_train.png"); err != nil {
		log.Fatal(err)
	}
}

func ExampleCompare_mlpTrain() {
	var runs []plots.Run
	for _, conf := range []string{"recorded", "expandable_segments:True", "roundup_power2_divisions:4", "max_split_size_mb:20"} {
		label := conf
		if conf == "recorded" {
			label = "recorded (defaults)" // as tracer plot labels it
		}
		runs = append(runs, plots.Run{Label: label, Summary: replayed(conf)})
	}
	// By event: the run idles 5 s first. Runs differ by a few segment
	// events, so their event indices align closely, not exactly.
	p, err := plots.Compare(runs, plots.Options{Title: "mlp_train: reserved memory by allocator setting", ByEvent: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/compare_mlp_train.png"); err != nil {
		log.Fatal(err)
	}
}

// ExampleSegments_expandable draws the sample replayed with expandable
// segments: one range per pool, two bars, each whole.
func ExampleSegments_expandable() {
	p, err := plots.Segments(replayed("expandable_segments:True"), plots.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/segments_expandable.png"); err != nil {
		log.Fatal(err)
	}
}

// oomRun is a synthetic 32 ms run that fills segments of 64 MiB until a
// request of 80 MiB fails after n of them, then frees everything: a
// millisecond trace with an OOM.
func oomRun(n int) *analysis.Summary {
	s := analysis.NewSummarizer(analysis.Options{Stacks: fakeStacks})
	const t0, seg = 1_700_000_000_000_000, 64 << 20
	var seq int64
	ev := func(tus int64, k trace.Kind, addr uint64, size int64, stack trace.StackID) {
		e := trace.Event{Seq: seq, TimeUs: t0 + tus, Kind: k, Addr: addr, Size: size, BlockSize: size, Stack: stack}
		if k == trace.KindAlloc || k == trace.KindFreeRequested || k == trace.KindFreeCompleted {
			e.BlockSize = seg - 4<<20
		}
		seq++
		s.Event(&e)
	}
	for i := range n {
		addr := uint64(i+1) * seg
		ev(int64(100*i), trace.KindSegmentAlloc, addr, seg, trace.NoStack)
		ev(int64(100*i+10), trace.KindAlloc, addr, seg-4<<20, trace.StackID(i%3))
	}
	ev(int64(100*n+50), trace.KindOOM, 1<<30, 80<<20, 1)
	for i := range n {
		addr := uint64(i+1) * seg
		ev(int64(30_000+50*i), trace.KindFreeRequested, addr, seg-4<<20, trace.StackID(i%3))
		ev(int64(30_000+50*i+1), trace.KindFreeCompleted, addr, seg-4<<20, trace.StackID(i%3))
	}
	return s.Finalize()
}

// ExamplePeak_oom draws a millisecond run with an out-of-memory error:
// the axis in ms, the OOM marked where reserved stood.
func ExamplePeak_oom() {
	p, err := plots.Peak(oomRun(40), plots.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/peak_oom.png"); err != nil {
		log.Fatal(err)
	}
}

// ExampleCompare_oom compares two such runs, each OOM in its run's colour.
func ExampleCompare_oom() {
	runs := []plots.Run{{Label: "recorded (defaults)", Summary: oomRun(40)}, {Label: "a larger limit", Summary: oomRun(48)}}
	p, err := plots.Compare(runs, plots.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := plots.Save(p, "testdata/compare_oom.png"); err != nil {
		log.Fatal(err)
	}
}
