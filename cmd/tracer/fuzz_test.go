package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func listing(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

// FuzzCLI runs command lines (words split at spaces) in a folder holding a
// snapshot s.pickle and its trace t.arrows: no panic, an exit status of 0,
// 1 or 2, and no file written outside that folder (the package's folder
// and the temporary directory stay as they were). Words with a path
// separator, "..", or that end in "-" (-o -, record -- PROGRAM) are left
// out: they would reach outside, print traces on the fuzzer's stdout, or
// run programs.
func FuzzCLI(f *testing.F) {
	for _, s := range []string{
		"import s.pickle -o s.pickle",
		"import s.pickle s.pickle -o d",
		"import s.pickle -o t.arrows --fraction 0.5 --total-memory 1GiB",
		"replay t.arrows -o t.arrows",
		"replay t.arrows --round 4096 -o r.arrows --json",
		"replay --conf expandable_segments:True --limit 1GiB",
		"record --workload backward-1gib --device sim -o b.arrows",
		"record --workload t.arrows -o t.arrows",
		"record -o x --stacks all",
		"plot p.png t.arrows --kind compare --round 4096",
		"plot t.arrows t.arrows",
		"info t.arrows --json",
		"analyze s.pickle --top 3",
		"import . --rank 2",
		"info t.arrows t.arrows --json",
		"replay . --round 4096",
		"diff t.arrows t.arrows --top 1",
		"version",
		"--bogus",
	} {
		f.Add(s)
	}
	pkg, err := os.Getwd()
	if err != nil {
		f.Fatal(err)
	}
	before := listing(f, pkg)
	snap, err := os.ReadFile(filepath.Join(snapshots, "mlp_train__default.pickle"))
	if err != nil {
		f.Fatal(err)
	}
	work := f.TempDir()
	os.WriteFile(filepath.Join(work, "s.pickle"), snap, 0o644)
	if code := run(context.Background(), []string{"import", filepath.Join(work, "s.pickle"), "-o", filepath.Join(work, "t.arrows")}, io.Discard, io.Discard); code != 0 {
		f.Fatalf("import: exit %d", code)
	}
	trc, err := os.ReadFile(filepath.Join(work, "t.arrows"))
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if len(args) > 16 {
			t.Skip()
		}
		for _, a := range args {
			if strings.ContainsAny(a, `/\`) || strings.Contains(a, "..") || strings.HasSuffix(a, "-") {
				t.Skip()
			}
		}
		dir, tmp := t.TempDir(), t.TempDir()
		os.WriteFile(filepath.Join(dir, "s.pickle"), snap, 0o644)
		os.WriteFile(filepath.Join(dir, "t.arrows"), trc, 0o644)
		t.Chdir(dir)
		t.Setenv("TMPDIR", tmp)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		code := run(ctx, args, io.Discard, io.Discard)
		if code < 0 || code > 2 {
			t.Errorf("tracer %q: exit %d", args, code)
		}
		if after := listing(t, pkg); !slices.Equal(after, before) {
			t.Errorf("tracer %q wrote into %s: %v", args, pkg, after)
		}
		if left := listing(t, tmp); len(left) != 0 {
			t.Errorf("tracer %q left %v in the temporary directory", args, left)
		}
	})
}
