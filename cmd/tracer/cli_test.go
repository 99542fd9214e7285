package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/trace"
)

// The real binary, for tests of what only a process shows: signals, exit
// statuses, files left after a kill. TRACER_BIN runs them on another build
// (an older one, to see them fail).
var bin struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bin.dir != "" {
		os.RemoveAll(bin.dir)
	}
	if pairRuns.dir != "" {
		os.RemoveAll(pairRuns.dir)
	}
	os.Exit(code)
}

func tracerBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TRACER_BIN"); p != "" {
		return p
	}
	bin.once.Do(func() {
		if bin.dir, bin.err = os.MkdirTemp("", "tracer-bin-"); bin.err != nil {
			return
		}
		bin.path = filepath.Join(bin.dir, "tracer")
		out, err := exec.Command("go", "build", "-pgo=off", "-o", bin.path, ".").CombinedOutput()
		if err != nil {
			bin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if bin.err != nil {
		t.Fatal(bin.err)
	}
	return bin.path
}

// execTracer runs the binary in dir and returns its exit status and output.
func execTracer(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	bin := tracerBin(t) // built first: the build is not the run's to time
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readTrace reads a whole trace from b and returns its events.
func readTrace(b []byte) (int64, error) {
	n, _, err := readTraceRest(b)
	return n, err
}

// readTraceRest is readTrace that also returns how many bytes of b follow
// the trace's end.
func readTraceRest(b []byte) (int64, int, error) {
	r := bytes.NewReader(b)
	rd, err := trace.NewReader(r, "trace")
	if err != nil {
		return 0, 0, err
	}
	n := int64(0)
	for rd.Next() {
		n++
	}
	if rd.Truncated() {
		return n, r.Len(), errors.New("cut short")
	}
	return n, r.Len(), rd.Err()
}

func isTrace(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return
	}
	if n, err := readTrace(b); err != nil || n == 0 {
		t.Errorf("%s: not a whole trace: %d events, %v", path, n, err)
	}
}

func sameBytes(t *testing.T, path string, want []byte) {
	t.Helper()
	if b, _ := os.ReadFile(path); !bytes.Equal(b, want) {
		t.Errorf("%s changed (%d bytes, was %d)", path, len(b), len(want))
	}
}

// only checks that dir holds exactly the names given: nothing was left
// behind, hidden temporary files included.
func only(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s holds %v, want %v", dir, got, want)
	}
}

// Outputs: never an input replaced, never a device or link target
// overwritten, never a partial file left. Each row runs the real binary in
// a fresh directory holding s.pickle (a real snapshot) and t.arrows (its
// trace).
func TestOutputs(t *testing.T) {
	snap, err := os.ReadFile(filepath.Join(snapshots, "mlp_train__default.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "s.pickle"), snap, 0o644)
	if code, _, stderr := execTracer(t, src, "import", "s.pickle", "-o", "t.arrows"); code != 0 {
		t.Fatalf("import: %s", stderr)
	}
	trc, _ := os.ReadFile(filepath.Join(src, "t.arrows"))
	long := strings.Repeat("x", 100_000)
	root := os.Geteuid() == 0

	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) // before the run
		args  []string
		fsize int // RLIMIT_FSIZE in KiB, when not 0
		code  int
		say   string                         // on stderr
		check func(t *testing.T, dir string) // after the run
	}{
		{name: "import output is the input", args: []string{"import", "s.pickle", "-o", "s.pickle"}, code: 2, say: "is the input s.pickle",
			check: func(t *testing.T, dir string) { sameBytes(t, dir+"/s.pickle", snap) }},
		{name: "import default output is the input", setup: func(t *testing.T, dir string) { os.Rename(dir+"/s.pickle", dir+"/snap.arrows") },
			args: []string{"import", "snap.arrows"}, code: 2, say: "is the input snap.arrows",
			check: func(t *testing.T, dir string) { sameBytes(t, dir+"/snap.arrows", snap) }},
		{name: "import output is a hard link to the input", setup: func(t *testing.T, dir string) { os.Link(dir+"/s.pickle", dir+"/h.arrows") },
			args: []string{"import", "s.pickle", "-o", "h.arrows"}, code: 2, say: "is the input",
			check: func(t *testing.T, dir string) { sameBytes(t, dir+"/s.pickle", snap) }},
		{name: "replay output is the trace", args: []string{"replay", "t.arrows", "-o", "./t.arrows"}, code: 2, say: "is the input t.arrows",
			check: func(t *testing.T, dir string) { sameBytes(t, dir+"/t.arrows", trc) }},
		{name: "record output is the workload", setup: func(t *testing.T, dir string) {
			os.WriteFile(dir+"/w.workload", []byte("alloc a 1MiB\n"), 0o644)
		}, args: []string{"record", "--workload", "w.workload", "--device", "sim", "-o", "w.workload"}, code: 2, say: "is the input w.workload",
			check: func(t *testing.T, dir string) { sameBytes(t, dir+"/w.workload", []byte("alloc a 1MiB\n")) }},
		{name: "plot output is the trace", args: []string{"plot", "t.png", "t.png"}, setup: func(t *testing.T, dir string) { copyFile(t, dir+"/t.arrows", dir+"/t.png") },
			code: 2, say: "is the input t.png", check: func(t *testing.T, dir string) { sameBytes(t, dir+"/t.png", trc) }},
		{name: "two inputs, one output", setup: func(t *testing.T, dir string) {
			os.Mkdir(dir+"/a", 0o755)
			os.Mkdir(dir+"/b", 0o755)
			copyFile(t, dir+"/s.pickle", dir+"/a/s.pickle")
			copyFile(t, dir+"/s.pickle", dir+"/b/s.pickle")
		}, args: []string{"import", "a/s.pickle", "b/s.pickle", "-o", "out"}, code: 2, say: "a/s.pickle and b/s.pickle would both be written to out/s.arrows",
			check: func(t *testing.T, dir string) { only(t, dir+"/out") }},
		{name: "import to a device", setup: func(t *testing.T, dir string) {
			if !root || syscall.Mknod(dir+"/null", syscall.S_IFCHR|0o666, 1<<8|3) != nil {
				t.Skip("cannot make a device here")
			}
		}, args: []string{"import", "s.pickle", "-o", "null"}, code: 0,
			check: func(t *testing.T, dir string) {
				if st, _ := os.Lstat(dir + "/null"); st.Mode()&os.ModeCharDevice == 0 {
					t.Errorf("the device became %v", st.Mode())
				}
			}},
		{name: "replay to a device", setup: func(t *testing.T, dir string) {
			if !root || syscall.Mknod(dir+"/null", syscall.S_IFCHR|0o666, 1<<8|3) != nil {
				t.Skip("cannot make a device here")
			}
		}, args: []string{"replay", "t.arrows", "-o", "null"}, code: 0,
			check: func(t *testing.T, dir string) {
				if st, _ := os.Lstat(dir + "/null"); st.Mode()&os.ModeCharDevice == 0 {
					t.Errorf("the device became %v", st.Mode())
				}
			}},
		{name: "import replaces a link", setup: func(t *testing.T, dir string) { os.Symlink("t.arrows", dir+"/link.arrows") },
			args: []string{"import", "s.pickle", "-o", "link.arrows"}, code: 0,
			check: func(t *testing.T, dir string) {
				sameBytes(t, dir+"/t.arrows", trc)
				if st, _ := os.Lstat(dir + "/link.arrows"); !st.Mode().IsRegular() {
					t.Errorf("link.arrows is %v", st.Mode())
				}
			}},
		{name: "record replaces a link", setup: func(t *testing.T, dir string) { os.Symlink("t.arrows", dir+"/link.arrows") },
			args: []string{"record", "--workload", "backward-1gib", "--device", "sim", "-o", "link.arrows"}, code: 0,
			check: func(t *testing.T, dir string) {
				sameBytes(t, dir+"/t.arrows", trc)
				if st, _ := os.Lstat(dir + "/link.arrows"); !st.Mode().IsRegular() {
					t.Errorf("link.arrows is %v", st.Mode())
				}
				isTrace(t, dir+"/link.arrows")
				only(t, dir, "link.arrows", "s.pickle", "t.arrows")
			}},
		{name: "plot on a full disk", args: []string{"plot", "p.png", "t.arrows"}, fsize: 16, code: 1, say: "p.png",
			check: func(t *testing.T, dir string) { only(t, dir, "s.pickle", "t.arrows") }},
		{name: "import on a full disk", args: []string{"import", "s.pickle", "-o", "o.arrows"}, fsize: 120, code: 1, say: "o.arrows",
			check: func(t *testing.T, dir string) { only(t, dir, "s.pickle", "t.arrows") }},
		{name: "record without a program", args: []string{"record", "-o", "x.arrows", "--"}, code: 2, say: "no program after --",
			check: func(t *testing.T, dir string) { only(t, dir, "s.pickle", "t.arrows") }},
		{name: "info on a FIFO", setup: func(t *testing.T, dir string) { syscall.Mkfifo(dir+"/f.arrows", 0o644) },
			args: []string{"info", "f.arrows"}, code: 1, say: "f.arrows is not a regular file (a FIFO)"},
		{name: "bad settings recorded in a trace", setup: func(t *testing.T, dir string) {
			w, err := trace.Create(dir+"/bad.arrows", trace.Meta{AllocConf: "bogus_key:1"}, trace.WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}, args: []string{"replay", "bad.arrows", "--round", "4096"}, code: 1, say: "bad.arrows: recorded PYTORCH_CUDA_ALLOC_CONF"},
		{name: "a 100 KB conf", args: []string{"replay", "t.arrows", "--conf", long}, code: 2, say: "bytes)"},
		{name: "a 100 KB conf to record", args: []string{"record", "--device", "sim", "--conf", long}, code: 2, say: "--conf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyFile(t, src+"/s.pickle", dir+"/s.pickle")
			copyFile(t, src+"/t.arrows", dir+"/t.arrows")
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			args := tc.args
			if tc.fsize > 0 {
				args = append([]string{"-c", fmt.Sprintf(`ulimit -f %d && exec "$0" "$@"`, tc.fsize*2), tracerBin(t)}, args...)
			}
			var code int
			var stderr string
			if tc.fsize > 0 {
				cmd := exec.Command("sh", args...) // ulimit -f counts 512-byte blocks in sh
				cmd.Dir = dir
				var errb bytes.Buffer
				cmd.Stderr = &errb
				cmd.Run()
				code, stderr = cmd.ProcessState.ExitCode(), errb.String()
			} else {
				code, _, stderr = execTracer(t, dir, args...)
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, clip(stderr))
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if tc.code != 0 && (!strings.Contains(lines[0], tc.say) || len(lines[0]) > 600) {
				t.Errorf("stderr %q: want one line of at most 600 bytes saying %q", clip(stderr), tc.say)
			}
			if hint := strings.Contains(stderr, "Run 'tracer --help'"); hint != (tc.code == 2) {
				t.Errorf("exit %d with usage hint %v: %q", code, hint, clip(stderr))
			}
			if tc.check != nil {
				tc.check(t, dir)
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// "-o -" writes the trace to stdout, and the report to stderr: import,
// replay and record.
func TestOutputStdout(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(snapshots, "mlp_train__default.pickle"), dir+"/s.pickle")
	code, stdout, stderr := execTracer(t, dir, "import", "s.pickle", "-o", "-")
	if _, err := readTrace([]byte(stdout)); code != 0 || err != nil || !strings.Contains(stderr, "-: ") {
		t.Fatalf("import -o -: exit %d, %v, stderr %q", code, err, stderr)
	}
	os.WriteFile(dir+"/t.arrows", []byte(stdout), 0o644)
	code, stdout, stderr = execTracer(t, dir, "replay", "t.arrows", "--round", "4096", "-o", "-")
	if _, err := readTrace([]byte(stdout)); code != 0 || err != nil || !strings.Contains(stderr, "reserved peak") {
		t.Fatalf("replay -o -: exit %d, %v, stderr %q", code, err, stderr)
	}
	code, stdout, stderr = execTracer(t, dir, "record", "--workload", "backward-1gib", "--device", "sim", "-o", "-")
	if _, err := readTrace([]byte(stdout)); code != 0 || err != nil || !strings.Contains(stderr, "→ -") {
		t.Fatalf("record -o -: exit %d, %v, stderr %q", code, err, stderr)
	}
	only(t, dir, "s.pickle", "t.arrows")
}

// A FIFO output is written to, and stays a FIFO.
func TestOutputFIFO(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(snapshots, "mlp_train__default.pickle"), dir+"/s.pickle")
	if err := syscall.Mkfifo(dir+"/f", 0o644); err != nil {
		t.Skip(err)
	}
	got := make(chan []byte)
	go func() {
		f, _ := os.Open(dir + "/f")
		b, _ := io.ReadAll(f)
		f.Close()
		got <- b
	}()
	if code, _, stderr := execTracer(t, dir, "import", "s.pickle", "-o", "f"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	select {
	case b := <-got:
		if n, err := readTrace(b); err != nil || n == 0 {
			t.Errorf("read %d events from the FIFO: %v", n, err)
		}
	case <-time.After(10 * time.Second):
		t.Error("nothing came through the FIFO") // its reader waits for ever
	}
	if st, _ := os.Lstat(dir + "/f"); st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO became %v", st.Mode())
	}
}

// Two recordings to one output at once: the last to finish wins, whole,
// with nothing of the other. The second starts once the first has written
// a MiB.
func TestRecordConcurrent(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/a.workload", []byte("repeat 200000\n  alloc a 1KiB\n  free a\nend\n"), 0o644)
	os.WriteFile(dir+"/b.workload", []byte("repeat 30000\n  alloc b 2KiB count=2\n  free b\nend\n"), 0o644)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	rec := func(i int, w string) {
		defer wg.Done()
		code, stdout, stderr := execTracer(t, dir, "record", "--workload", w, "--device", "sim", "-o", "same.arrows")
		if code != 0 {
			t.Errorf("%s: exit %d: %s", w, code, stderr)
		}
		outs[i] = stdout
	}
	wg.Add(2)
	go rec(0, "a.workload")
	// The first has written its first MiB (where, the first run says).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		m, _ := filepath.Glob(dir + "/same*.arrows")
		if st, err := os.Stat(strings.Join(m, "")); err == nil && st.Size() > 1<<20 {
			break
		}
	}
	go rec(1, "b.workload")
	wg.Wait()
	b, _ := os.ReadFile(dir + "/same.arrows")
	n, rest, err := readTraceRest(b)
	if err != nil || rest != 0 {
		t.Fatalf("same.arrows: %d events, then %d bytes more; %v", n, rest, err)
	}
	if want := fmt.Sprintf(": %d events in", n); !strings.Contains(outs[0], want) && !strings.Contains(outs[1], want) {
		t.Errorf("same.arrows holds %d events; the runs said %q and %q", n, outs[0], outs[1])
	}
	only(t, dir, "a.workload", "b.workload", "same.arrows")
}
