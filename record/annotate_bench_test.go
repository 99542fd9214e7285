package record

import (
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record/torchsnap"
	"github.com/tracer-dev/tracer/trace"
)

// BenchmarkAnnotate measures the import's replay that annotates block sizes
// (annotateBlockSizes) alone, on a snapshot decoded once into a spill, with
// the writer's side reduced to handing the chunks back: every real snapshot
// in testdata/snapshots, and the file named by TRACER_IMPORT_BENCH if set
// (testdata/bench/real_snapshot.py makes a real training run's). It reports
// events/s.
func BenchmarkAnnotate(b *testing.B) {
	for _, in := range benchSnapshots(b) {
		b.Run(snapshotName(in), func(b *testing.B) {
			snap, err := torchsnap.Open(in, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer snap.Close()
			conf, err := allocator.ParseConf(snap.Settings.AllocConf)
			if err != nil {
				b.Fatal(err)
			}
			var n int64
			initial := make([][]trace.Event, len(snap.Devices))
			for i, d := range snap.Devices {
				if initial[i], err = d.Reconstruct(conf.RoundSize); err != nil {
					b.Fatal(err)
				}
				n += d.Len()
			}
			for b.Loop() {
				for i, d := range snap.Devices {
					full, free := make(chan []trace.Event, 3), make(chan []trace.Event, 3)
					for range 3 {
						free <- make([]trace.Event, torchsnap.ChunkSize)
					}
					done := make(chan int64)
					go func() {
						var got int64
						for evs := range full {
							got += int64(len(evs))
							free <- evs[:cap(evs)]
						}
						done <- got
					}()
					_, err := annotateBlockSizes(conf, snap.Settings.JSON != "", 0, 0, initial[i], d, nil, privateSegments(d), full, free, nil)
					close(full)
					if got := <-done; err == nil && got != d.Len() {
						b.Fatalf("device %d: %d events handed on of %d", d.Index, got, d.Len())
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(int64(b.N)*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
