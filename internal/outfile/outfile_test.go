package outfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func names(t *testing.T, dir string) []string {
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

func write(t *testing.T, o *File, s string) {
	t.Helper()
	if _, err := io.WriteString(o.File(), s); err != nil {
		t.Fatal(err)
	}
}

// Until Commit nothing is at the path, and on Linux nothing at all is in
// the directory (an unnamed file); Commit puts the whole file there,
// replacing the old one.
func TestCreateCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.arrows")
	os.WriteFile(path, []byte("old"), 0o644)
	o, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, o, "new contents")
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("before Commit the path holds %q", b)
	}
	if runtime.GOOS == "linux" {
		if n := names(t, dir); len(n) != 1 {
			t.Errorf("while writing, the directory holds %v: want only the old output", n)
		}
	}
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new contents" {
		t.Errorf("after Commit the path holds %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode())
	}
	if n := names(t, dir); len(n) != 1 {
		t.Errorf("left %v", n)
	}
	if err := o.Commit(); err == nil {
		t.Error("a second Commit succeeded")
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	for _, partial := range []bool{false, true} {
		o, err := create(filepath.Join(dir, "out.arrows"), partial)
		if err != nil {
			t.Fatal(err)
		}
		write(t, o, "x")
		o.Abort()
		o.Abort()
		if n := names(t, dir); len(n) != 0 {
			t.Errorf("partial %v: Abort left %v", partial, n)
		}
	}
}

// A symbolic link at the output path is replaced; its target is untouched.
func TestReplacesSymlink(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target.arrows"), filepath.Join(dir, "link.arrows")
	os.WriteFile(target, []byte("target"), 0o644)
	os.Symlink(target, link)
	for _, partial := range []bool{false, true} {
		o, err := create(link, partial)
		if err != nil {
			t.Fatal(err)
		}
		write(t, o, "new")
		if err := o.Commit(); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(target); string(b) != "target" {
			t.Errorf("partial %v: the link's target now holds %q", partial, b)
		}
		if st, _ := os.Lstat(link); !st.Mode().IsRegular() {
			t.Errorf("partial %v: the link is still %v", partial, st.Mode())
		}
		os.Remove(link)
		os.Symlink(target, link)
	}
}

// A FIFO is written to, not replaced.
func TestFIFOWrittenDirectly(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	got := make(chan string)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- string(b)
	}()
	o, err := Create(fifo)
	if err != nil {
		t.Fatal(err)
	}
	write(t, o, "through the pipe")
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through the pipe" {
		t.Errorf("the reader got %q", s)
	}
	if st, _ := os.Lstat(fifo); st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO became %v", st.Mode())
	}
}

// A character device (a null device made in the test's directory, as
// root) stays a device.
func TestDeviceWrittenDirectly(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "null")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Skip("cannot make a device here:", err)
	}
	o, err := Create(dev)
	if err != nil {
		t.Fatal(err)
	}
	write(t, o, "discarded")
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(dev); st.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("the device became %v", st.Mode())
	}
	if ScratchDir(dev) != os.TempDir() {
		t.Errorf("scratch files for a device go to %s", ScratchDir(dev))
	}
}

// A partial recording is visible beside the output while written, and
// renamed to it at Commit.
func TestPartial(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rec.arrows")
	o, err := CreatePartial(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, o, "events")
	p := o.Partial()
	if ok, _ := filepath.Match(PartialPattern(path), p); !ok {
		t.Errorf("partial %q does not match %q", p, PartialPattern(path))
	}
	if b, _ := os.ReadFile(p); string(b) != "events" {
		t.Errorf("partial file holds %q", b)
	}
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := names(t, dir); len(n) != 1 || n[0] != "rec.arrows" {
		t.Errorf("after Commit: %v", n)
	}
}

// Of two writers of one output, the last to commit wins, whole.
func TestLastWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	a, _ := Create(path)
	b, _ := CreatePartial(path)
	write(t, a, strings.Repeat("a", 1000))
	write(t, b, strings.Repeat("b", 10))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if s, _ := os.ReadFile(path); string(s) != strings.Repeat("a", 1000) {
		t.Errorf("got %d bytes, want a's 1000", len(s))
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pickle")
	os.WriteFile(in, []byte("snapshot"), 0o644)
	hard, sym, other := filepath.Join(dir, "hard"), filepath.Join(dir, "sym"), filepath.Join(dir, "other")
	os.Link(in, hard)
	os.Symlink(in, sym)
	for _, tc := range []struct {
		out, in string
		refuse  bool
	}{
		{in, in, true},
		{dir + "/./in.pickle", in, true},
		{hard, in, true},
		{sym, in, true},
		{in, sym, true},
		{other, in, false},
		{filepath.Join(dir, "new"), filepath.Join(dir, "new"), true},
		{"", in, false},
		{Stdout, in, false},
	} {
		err := Check(tc.out, "", tc.in)
		var ce *ConflictError
		if refused := errors.As(err, &ce); refused != tc.refuse {
			t.Errorf("Check(%s, %s) = %v, want refused %v", tc.out, tc.in, err, tc.refuse)
		}
	}
}

// A hidden temporary file of a process that is gone is removed by the
// next writer of that output; one of a live process stays.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, fmt.Sprintf("%s%d-123", tempPrefix("out"), 1<<30))
	live := filepath.Join(dir, fmt.Sprintf("%s%d-123", tempPrefix("out"), os.Getppid()))
	other := filepath.Join(dir, fmt.Sprintf("%s%d-123", tempPrefix("other"), 1<<30))
	for _, p := range []string{dead, live, other} {
		os.WriteFile(p, nil, 0o644)
	}
	removeStale(dir, "out")
	for p, want := range map[string]bool{dead: false, live: true, other: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}

// Where files cannot be unnamed, the output is written to a hidden file
// named after it and the process, renamed at Commit, removed at Abort.
func TestCreateFallback(t *testing.T) {
	noUnnamed = true
	defer func() { noUnnamed = false }()
	dir := t.TempDir()
	path := filepath.Join(dir, "out.arrows")
	for _, commit := range []bool{true, false} {
		o, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		write(t, o, "data")
		n := names(t, dir)
		if !strings.HasPrefix(n[0], fmt.Sprintf(".out.arrows.tracer-%d-", os.Getpid())) {
			t.Errorf("while writing: %v", n)
		}
		if commit {
			if err := o.Commit(); err != nil {
				t.Fatal(err)
			}
		} else {
			o.Abort()
		}
		if n := names(t, dir); len(n) != 1 || n[0] != "out.arrows" {
			t.Errorf("commit %v: left %v", commit, n)
		}
	}
}
