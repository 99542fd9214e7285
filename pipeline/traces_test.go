package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

func TestPaths(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.rank1.arrows", "a.rank0.arrows", "c.ARROW", "notes.txt", ".hidden.arrows", "s.pickle"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	os.Mkdir(filepath.Join(dir, "sub.arrows"), 0o755)
	got, several, err := Paths([]string{dir})
	want := []string{filepath.Join(dir, "a.rank0.arrows"), filepath.Join(dir, "b.rank1.arrows"), filepath.Join(dir, "c.ARROW")}
	if err != nil || !several || !slices.Equal(got, want) {
		t.Errorf("Paths(dir) = %v, %v, %v; want %v, several", got, several, err, want)
	}
	// One file is one trace, as before; a missing one is left to Open.
	if got, several, err := Paths([]string{"x.arrows"}); err != nil || several || len(got) != 1 {
		t.Errorf("one file: %v %v %v", got, several, err)
	}
	if got, several, _ := Paths([]string{"x.arrows", "y.arrows"}); !several || len(got) != 2 {
		t.Errorf("two files: %v %v", got, several)
	}
	if got, several, _ := Paths(nil); several || len(got) != 0 {
		t.Errorf("no argument (the sample): %v %v", got, several)
	}
	empty := t.TempDir()
	if _, _, err := Paths([]string{empty}); err == nil || !strings.Contains(err.Error(), "holds no traces") {
		t.Errorf("an empty folder: %v", err)
	}
}

// Each returns the first error by index, and once a call fails the calls
// not yet started do not run: with every call failing, no more run than
// may run at once.
func TestEach(t *testing.T) {
	var ran atomic.Int32
	err := Each(context.Background(), 50, func(ctx context.Context, i int) error {
		ran.Add(1)
		return fmt.Errorf("call %d", i)
	})
	if n, most := ran.Load(), int32(max(1, runtime.GOMAXPROCS(0)/2)); err == nil || n > most {
		t.Errorf("Each = %v after %d calls; want an error after at most %d", err, n, most)
	}
	err = Each(context.Background(), 3, func(ctx context.Context, i int) error {
		if i == 0 {
			return nil
		}
		return fmt.Errorf("call %d", i)
	})
	if err == nil || err.Error() != "call 1" && err.Error() != "call 2" {
		t.Errorf("Each = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran.Store(0)
	if err := Each(ctx, 5, func(context.Context, int) error { ran.Add(1); return nil }); !errors.Is(err, context.Canceled) || ran.Load() != 0 {
		t.Errorf("cancelled: %v, %d ran", err, ran.Load())
	}
}
