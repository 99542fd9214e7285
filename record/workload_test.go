package record_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/record"
)

func TestParseWorkloadErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"alloc a 12XB\n", `w.workload:1: alloc: size "12XB": unknown unit "XB"`},
		{"alloc a\n", `w.workload:1: alloc: want "alloc NAME SIZE [count=N] [stream=S]"`},
		{"alloc a 0\n", `w.workload:1: alloc: size "0": must be at least 1`},
		{"alloc a 1 count=0\n", `w.workload:1: alloc: count=0: must be at least 1`},
		{"alloc a 1 count=2MiB\n", `w.workload:1: alloc: count=2MiB: "2MiB": a count takes no unit`},
		{"alloc a 1 colour=red\n", `w.workload:1: alloc: unknown option "colour"`},
		{"alloc a 1 count=1 count=2\n", `w.workload:1: option count given twice`},
		{"alloc a 1\nfree b\n", `w.workload:2: no earlier alloc of "b"`},
		{"alloc 9a 1\n", `w.workload:1: buffer name "9a"`},
		{"alloc a 1\nrepeat 3\nalloc b 1\n", `w.workload:2: repeat without end`},
		{"alloc a 1\nend\n", `w.workload:2: end without repeat`},
		{"repeat 2\nend\n", `w.workload:1: empty repeat block`},
		{"launch a\n", `w.workload:1: unknown statement "launch"`},
		{"alloc a 1\ndescription late\n", `w.workload:2: description must come before the first statement`},
		{"# only comments\n", `w.workload:1: no statements`},
		{"alloc a 1PiB\n", `unknown unit "PiB"`},
		{"alloc a 999999999999TiB\n", `too large`},
		{"alloc a 1024*1024*1024*1024*1024*1024\n", `out of range`},
		{"alloc a 2-3\n", `out of range`},
		{"alloc a 2+\n", `ends with an operator`},
		{"free a from=-0\n", `no earlier alloc`},
		{"alloc a 1\nfree a from=-0\n", `from=-0`},
		{"alloc a 1\nsync now\n", `sync: want "sync"`},
	} {
		_, err := record.ParseWorkload("w.workload", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.src, err, tc.want)
		}
	}
}

// A generated workload of a line per request parses up to the 8 MiB limit
// (64,000 distinct sizes are 1.4 MB, past the 1 MiB the limit was), and a
// longer file is refused with one line that names it.
func TestParseWorkloadLimit(t *testing.T) {
	var b strings.Builder
	for j := range 64000 {
		fmt.Fprintf(&b, "alloc g%d %d\n", j, 2<<20+(j+1)*512)
	}
	if _, err := record.ParseWorkload("grow.workload", []byte(b.String())); err != nil {
		t.Fatalf("%d bytes: %v", b.Len(), err)
	}
	for b.Len() <= 8<<20 {
		b.WriteString("# a comment line to pass the limit\n")
	}
	_, err := record.ParseWorkload("big.workload", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "big.workload: workload is") || strings.Contains(err.Error(), "\n") {
		t.Errorf("%d bytes: err = %v, want one line naming big.workload and the limit", b.Len(), err)
	}
}

// Every problem of a file is reported at once, each with its line.
func TestParseWorkloadReportsAll(t *testing.T) {
	_, err := record.ParseWorkload("w.workload", []byte("alloc a 1X\nfree zz\nbogus\n"))
	if err == nil || strings.Count(err.Error(), "\n") != 2 || !strings.Contains(err.Error(), "w.workload:3:") {
		t.Errorf("err = %v", err)
	}
}

func TestParseWorkload(t *testing.T) {
	w, err := record.ParseWorkload("dir/my-run.workload", []byte(`description  a test   workload
# comment
alloc a 129*4 count=4*1024 stream=3   # trailing comment
repeat 2
  alloc b 2MiB+1
  free b reverse
end
free a step=2 from=1 count=3
record_stream a stream=9
sync
empty_cache
snapshot
`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "my-run" || w.Description != "a test   workload" || w.Statements() != 9 {
		t.Errorf("name %q, description %q, %d statements", w.Name, w.Description, w.Statements())
	}
}

// Every built-in parses, has a description, and is listed; the example
// workloads of testdata/workloads parse too.
func TestBuiltinsParse(t *testing.T) {
	names := []string{}
	for _, w := range record.Builtins() {
		names = append(names, w.Name)
		if w.Description == "" {
			t.Errorf("%s has no description", w.Name)
		}
	}
	if got := strings.Join(names, " "); got != "backward-1gib block-boundary fragment-10mb small-tensors tiny-tensors" {
		t.Errorf("built-ins: %s", got)
	}
	if _, ok := record.Builtin(record.DefaultWorkload); !ok {
		t.Errorf("default workload %s is not built in", record.DefaultWorkload)
	}
	files, _ := filepath.Glob("../testdata/workloads/*.workload")
	if len(files) == 0 {
		t.Fatal("no example workloads in testdata/workloads")
	}
	for _, f := range files {
		if _, err := record.LoadWorkload(f); err != nil {
			t.Error(err)
		}
	}
	if _, err := record.LoadWorkload("no-such-workload"); err == nil || !strings.Contains(err.Error(), "built-ins: backward-1gib,") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := record.LoadWorkload(filepath.Join(t.TempDir(), "x.workload")); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("missing file: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}
