package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/tracer-dev/tracer/analysis"
)

// traceExts are the extensions of the files Paths takes from a folder.
var traceExts = []string{".arrows", ".arrow"}

// Paths expands the TRACE arguments of a command: a folder stands for the
// traces in it (*.arrows, *.arrow; not its subfolders), sorted by name.
// Several is true when the command reports traces side by side (more than
// one argument, or a folder), false for one trace file as before.
func Paths(args []string) (paths []string, several bool, err error) {
	several = len(args) > 1
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil || !st.IsDir() {
			paths = append(paths, a) // Open says what is wrong with it
			continue
		}
		several = true
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, false, err
		}
		n := 0
		for _, e := range ents {
			if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") && slices.Contains(traceExts, strings.ToLower(filepath.Ext(e.Name()))) {
				paths = append(paths, filepath.Join(a, e.Name()))
				n++
			}
		}
		if n == 0 {
			return nil, false, fmt.Errorf("%s holds no traces (*.arrows): tracer import %s -o DIR makes them from snapshots", a, a)
		}
	}
	return paths, several, nil
}

// Rank is the input's distributed rank (analysis.TraceRank), or
// analysis.NoRank.
func (in *Input) Rank() int {
	r, ok := analysis.TraceRank(in.Meta, in.Name)
	if !ok {
		return analysis.NoRank
	}
	return r
}

// Each calls fn(ctx, i) for i in [0, n), a few at once: each call runs a
// pipeline of its own (three goroutines), so at most half the CPUs' worth
// of calls run together. The first error, by index, is returned; it
// cancels the calls not yet started.
func Each(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := ctx.Err(); err != nil {
				errs[i] = err
				return
			}
			if errs[i] = fn(ctx, i); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && err != context.Canceled {
			return err
		}
	}
	return context.Cause(ctx) // the caller's cancellation, if any
}
