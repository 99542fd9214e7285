package view

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/record"
)

// benchTrace records, once per test binary and kind, a training loop on
// the simulated device: 243 events per step, 8,230 steps by default, so
// 2.0M events (issue 25's size). The "live" kind first allocates 50,000
// blocks that stay live, so that every moment holds that many.
// TRACER_BENCH_STEPS changes the step count.
func benchTrace(kind string) (string, error) {
	benchOnce.Lock()
	defer benchOnce.Unlock()
	if p, ok := benchPaths[kind]; ok {
		return p, nil
	}
	steps := 8230
	if s := os.Getenv("TRACER_BENCH_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return "", fmt.Errorf("TRACER_BENCH_STEPS: %v", err)
		}
		steps = n
	}
	keep := ""
	if kind == "live" {
		keep = "alloc kept 4096 count=50000\n"
		steps -= 50000 / 243
	}
	src := fmt.Sprintf(`description a training loop of small and medium tensors
alloc weights 64MiB count=8
%srepeat %d
  alloc act 3MB count=20
  alloc small 40000 count=40
  alloc logits 8MB
  alloc grad 1MiB count=20
  free act reverse
  free small
  free logits
  free grad
end
`, keep, steps)
	dir, err := os.MkdirTemp("", "tracer-view-bench-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, kind+".arrows")
	if err := record.RecordWorkloadSim(context.Background(), "train.workload", []byte(src), out); err != nil {
		return "", err
	}
	benchPaths[kind] = out
	return out, nil
}

var (
	benchOnce  sync.Mutex
	benchPaths = map[string]string{}
)

func benchView(b *testing.B, kind string) *View {
	b.Helper()
	path, err := benchTrace(kind)
	if err != nil {
		b.Fatal(err)
	}
	v, err := Load(context.Background(), Options{Paths: []string{path}})
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// BenchmarkFirstPaint is what `tracer view TRACE` does before the page can
// draw: load and index the trace, then answer the page, /api/info and the
// whole-range timeline at 1600 columns. It reports the heap the view holds.
func BenchmarkFirstPaint(b *testing.B) {
	path, err := benchTrace("train")
	if err != nil {
		b.Fatal(err)
	}
	var events int64
	var heap uint64
	cpu0 := cpuTime()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		v, err := Load(context.Background(), Options{Paths: []string{path}})
		if err != nil {
			b.Fatal(err)
		}
		h := v.Handler()
		for _, u := range []string{"/", "/api/info", fmt.Sprintf("/api/timeline?trace=0&x0=0&x1=%d&cols=1600", v.Traces[0].Events())} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", u, nil))
			if w.Code != 200 {
				b.Fatalf("%s: %d", u, w.Code)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
		events = v.Traces[0].Events()
		runtime.KeepAlive(v)
		b.StartTimer()
	}
	b.ReportMetric(float64(events), "events")
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(heap)/float64(events), "heap-B/event")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
}

// BenchmarkEndpoints times each request the page makes on a zoom or a
// click, through the handler (JSON encoding included).
func BenchmarkEndpoints(b *testing.B) {
	for _, kind := range []string{"train", "live"} {
		b.Run(kind, func(b *testing.B) { benchEndpoints(b, benchView(b, kind)) })
	}
}

func benchEndpoints(b *testing.B, v *View) {
	t := v.Traces[0]
	n := t.Events()
	peak := t.sum.Peaks.Allocated.Event
	h := v.Handler()
	for _, c := range []struct{ name, url string }{
		{"timeline_whole", fmt.Sprintf("/api/timeline?trace=0&x0=0&x1=%d&cols=1600", n)},
		{"timeline_tenth", fmt.Sprintf("/api/timeline?trace=0&x0=%d&x1=%d&cols=1600", n/2, n/2+n/10)},
		{"timeline_100k", fmt.Sprintf("/api/timeline?trace=0&x0=%d&x1=%d&cols=1600", n/3, n/3+100_000)},
		{"timeline_events", fmt.Sprintf("/api/timeline?trace=0&x0=%d&x1=%d&cols=1600", n-t.every/2, n-t.every/2+3000)},
		{"moment_peak", fmt.Sprintf("/api/moment?trace=0&event=%d", peak)},
		{"moment_far", fmt.Sprintf("/api/moment?trace=0&event=%d", t.every*int64(len(t.cps)-1)-1)},
		{"moment_end", fmt.Sprintf("/api/moment?trace=0&event=%d", n-1)},
		{"stack", "/api/stack?trace=0&stack=0"},
	} {
		b.Run(c.name, func(b *testing.B) {
			var size int
			cpu0 := cpuTime()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", c.url, nil))
				if w.Code != 200 {
					b.Fatalf("%s: %d %s", c.url, w.Code, w.Body)
				}
				size = w.Body.Len()
			}
			b.ReportMetric(float64(size)/1024, "resp-KiB")
			b.ReportMetric((cpuTime()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the CPU time (user + system) the process has used: on a
// machine shared with other work, a truer cost than the wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReport writes the self-contained report of the 2M-event trace.
func BenchmarkReport(b *testing.B) {
	for _, kind := range []string{"train", "live"} {
		b.Run(kind, func(b *testing.B) {
			v := benchView(b, kind)
			var size int64
			for b.Loop() {
				cw := &counter{}
				if err := v.WriteReport(context.Background(), cw); err != nil {
					b.Fatal(err)
				}
				size = cw.n
			}
			b.ReportMetric(float64(size)/(1<<20), "report-MiB")
		})
	}
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*counter)(nil)
