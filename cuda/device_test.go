//go:build cgo

package cuda

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// gpuTests reports whether tests may use a real GPU (TRACER_GPU=1).
func gpuTests() bool { return os.Getenv("TRACER_GPU") == "1" }

func TestLoad_missingLibrary(t *testing.T) {
	err := load("libtracer-no-such-driver.so.1")
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("load = %v, want ErrNoDriver", err)
	}
	const prefix = "cuda: no CUDA driver found (libtracer-no-such-driver.so.1: "
	if !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("load error = %q, want prefix %q", err, prefix)
	}
}

func TestOpen_noDriver(t *testing.T) {
	if gpuTests() {
		t.Skip("TRACER_GPU=1: the driver is expected")
	}
	d, err := Open(0)
	if err == nil {
		d.Close()
		t.Skip("this machine has a CUDA driver and a GPU")
	}
	if errors.Is(err, ErrNoDriver) {
		if !strings.HasPrefix(err.Error(), "cuda: no CUDA driver found (libcuda.so.1: ") && !strings.Contains(err.Error(), "cuInit") {
			t.Errorf("Open(0) error = %q", err)
		}
		return
	}
	t.Errorf("Open(0) = %v, want an error wrapping ErrNoDriver", err)
}
