package record_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/trace"
)

// Real-GPU tests: run with TRACER_GPU=1 (see testdata/gpu-run.sh).
func needGPU(t *testing.T) {
	if os.Getenv("TRACER_GPU") != "1" {
		t.Skip("set TRACER_GPU=1 to run on a GPU")
	}
}

// Each built-in workload runs live on the GPU: real segment addresses, the
// same events as on the simulated device (addresses aside), NVML samples on
// the events, and the GPU's memory given back at the end.
func TestGPUBuiltins(t *testing.T) {
	needGPU(t)
	for _, w := range record.Builtins() {
		t.Run(w.Name, func(t *testing.T) {
			tg, err := record.OpenTarget(record.DeviceCUDA, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), w.Name+".arrows")
			res, err := record.Record(context.Background(), record.Options{Workload: w, Target: tg, Out: out})
			tg.Close()
			if err != nil {
				t.Fatal(err)
			}
			simPath, simRes := recordSim(t, w, record.Options{})
			if res.Events != simRes.Events || res.Stats.ReservedBytes[0].Peak != simRes.Stats.ReservedBytes[0].Peak ||
				res.Stats.AllocatedBytes[0].Peak != simRes.Stats.AllocatedBytes[0].Peak {
				t.Errorf("GPU: %d events, peaks %d/%d; sim: %d events, peaks %d/%d", res.Events,
					res.Stats.ReservedBytes[0].Peak, res.Stats.AllocatedBytes[0].Peak, simRes.Events,
					simRes.Stats.ReservedBytes[0].Peak, simRes.Stats.AllocatedBytes[0].Peak)
			}
			_, _, _, gpu := replayState(t, out)
			_, _, _, sim := replayState(t, simPath)
			sampled := 0
			for i := range gpu {
				g, s := gpu[i], sim[i]
				if g.Kind != s.Kind || g.Size != s.Size || g.BlockSize != s.BlockSize {
					t.Fatalf("event %d: GPU %v %d, sim %v %d", i, g.Kind, g.Size, s.Kind, s.Size)
				}
				if g.Kind == trace.KindSegmentAlloc && (g.Addr == 0 || g.Addr >= 1<<48) {
					t.Errorf("event %d: segment at %#x is not a device address", i, g.Addr)
				}
				if g.DeviceUsed > 0 {
					sampled++
				}
			}
			if sampled == 0 || res.Samples == 0 {
				t.Errorf("no event carries an NVML sample (%d samples taken, err %v)", res.Samples, res.SampleErr)
			}
			t.Logf("%s: %d events in %v (%.0f events/s), %d NVML samples", w.Name, res.Events, res.Elapsed,
				float64(res.Events)/res.Elapsed.Seconds(), res.Samples)
		})
	}
}

// Under a memory limit the fragmentation workload runs out of memory on the
// GPU as on the simulated device.
func TestGPUOOMUnderLimit(t *testing.T) {
	needGPU(t)
	w, _ := record.Builtin("fragment-10mb")
	tg, err := record.OpenTarget(record.DeviceCUDA, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	_, err = record.Record(context.Background(), record.Options{Workload: w, Target: tg, Limit: 1100 << 20, Out: filepath.Join(t.TempDir(), "oom.arrows")})
	if !allocator.IsOOM(err) {
		t.Fatalf("err = %v, want an OOM", err)
	}
}

// A real PyTorch program, recorded through the startup hook.
func TestGPUProgram(t *testing.T) {
	needGPU(t)
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	if err := exec.Command(python, "-c", "import torch; assert torch.cuda.is_available()").Run(); err != nil {
		t.Skipf("%s has no torch with CUDA: %v", python, err)
	}
	// go test runs in record/; gpu-run.sh runs the test binary from the repo root.
	script := "testdata/train_small.py"
	if _, err := os.Stat(script); err != nil {
		script = "record/testdata/train_small.py"
	}
	out := filepath.Join(t.TempDir(), "train.arrows")
	res, err, stdout, stderr := runProgram(t, record.ProgramOptions{Args: []string{python, script}, Out: out})
	if err != nil {
		t.Fatalf("%v\nstdout %s\nstderr %s", err, stdout, stderr)
	}
	if res.ExitCode != 0 || len(res.Traces) != 1 || res.Traces[0].Events < 100 || len(res.Warnings) > 0 {
		t.Fatalf("res %+v, warnings %v\nstderr %s", res, res.Warnings, stderr)
	}
	rd, err := trace.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	withStack := 0
	for rd.Next() {
		if rd.Event().Stack != trace.NoStack {
			withStack++
		}
		if rd.Event().Reconstructed() {
			t.Fatalf("event %d is reconstructed: recording started after the first allocation", rd.Event().Seq)
		}
	}
	if withStack == 0 {
		t.Errorf("no event has a Python stack")
	}
	t.Logf("%d events, peak reserved %d, %d with stacks", res.Traces[0].Events, res.Traces[0].Peak.Reserved, withStack)
}
