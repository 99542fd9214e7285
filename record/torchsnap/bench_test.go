package torchsnap

import (
	"bytes"
	"flag"
	"os"
	"runtime"
	"testing"
	"time"
)

// BenchmarkDecode decodes each real snapshot, the file named by
// TORCHSNAP_BENCH_FILE if set, and a generated 2.5M-event (≈200 MB) one,
// from memory; it reports events/s and input MB/s.
func BenchmarkDecode(b *testing.B) {
	type input struct {
		name string
		load func() []byte
	}
	var inputs []input
	for _, path := range realSnapshots(b) {
		inputs = append(inputs, input{name(path), func() []byte {
			data, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			return data
		}})
	}
	if path := os.Getenv("TORCHSNAP_BENCH_FILE"); path != "" {
		// Any other file, e.g. one made by testdata/scale_snapshot.py.
		inputs = append(inputs, input{"file_" + name(path), func() []byte {
			data, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			return data
		}})
	}
	// The 9 MB snapshot of the performance notes in doc.go.
	inputs = append(inputs, input{"multistream_x49", func() []byte { return scaledSnapshot(b, scaledPath, 49) }})
	inputs = append(inputs, input{"synthetic_2500k", func() []byte {
		var buf bytes.Buffer
		if err := writeSyntheticSnapshot(&buf, 2_500_000); err != nil {
			b.Fatal(err)
		}
		return buf.Bytes()
	}})
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			data := in.load()
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			events := 0
			for i := 0; i < b.N; i++ {
				s, err := Decode(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				events = 0
				for _, d := range s.Devices {
					events += len(d.Events)
				}
			}
			b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkAnalyze reconstructs and validates the 9 MB snapshot of the
// performance notes in doc.go (multistream ×49, decoded once), as an import
// does after decoding.
func BenchmarkAnalyze(b *testing.B) {
	s, err := Decode(bytes.NewReader(scaledSnapshot(b, scaledPath, 49)))
	if err != nil {
		b.Fatal(err)
	}
	d := s.Devices[0]
	b.Run("reconstruct", func(b *testing.B) {
		for range b.N {
			if _, err := d.Reconstruct(roundSize); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("validate", func(b *testing.B) {
		// From the start state Reconstruct derives, as an import validates.
		if _, err := d.Reconstruct(roundSize); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			d.Validate()
		}
	})
}

// TestDecodeFile times one file's decode, reconstruction and validation, for
// comparisons with python3 and `tracer import` under /usr/bin/time:
//
//	go test -c -o ts.test && /usr/bin/time -v ./ts.test -test.run DecodeFile -file F
var (
	decodeFile = flag.String("file", "", "snapshot for TestDecodeFile")
	decodeOnly = flag.Bool("decode-only", false, "TestDecodeFile: skip reconstruction and validation")
)

func TestDecodeFile(t *testing.T) {
	if *decodeFile == "" {
		t.Skip("no -file")
	}
	start := time.Now()
	s, err := ReadFile(*decodeFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := time.Since(start)
	n := 0
	for _, d := range s.Devices {
		n += len(d.Events)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if *decodeOnly {
		t.Logf("%d events: decode %v; heap in use %d MB", n, dec, ms.HeapInuse>>20)
		return
	}
	start = time.Now()
	for _, d := range s.Devices {
		if _, err := d.Reconstruct(roundSize); err != nil {
			t.Fatal(err)
		}
	}
	rec := time.Since(start)
	start = time.Now()
	for _, d := range s.Devices {
		d.Validate()
	}
	t.Logf("%d events: decode %v, reconstruct %v, validate %v; heap in use %d MB, total alloc %d MB",
		n, dec, rec, time.Since(start), ms.HeapInuse>>20, ms.TotalAlloc>>20)
}
