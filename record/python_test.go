package record_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/record"
	"github.com/tracer-dev/tracer/trace"
)

// snapshot is a real PyTorch snapshot the fakes "dump".
var snapshot, _ = filepath.Abs("../testdata/snapshots/oom__default__seed1.pickle")

func fakeEnv(kv ...string) []string {
	return append(os.Environ(), append([]string{"FAKE_SNAPSHOT=" + snapshot, "FAKE_TORCH_SNAPSHOT=" + snapshot}, kv...)...)
}

func runProgram(t *testing.T, opts record.ProgramOptions) (*record.ProgramResult, error, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	opts.Stdout, opts.Stderr, opts.Stdin = &out, &errb, strings.NewReader("")
	if opts.Out == "" {
		opts.Out = filepath.Join(t.TempDir(), "prog.arrows")
	}
	res, err := record.RecordProgram(context.Background(), opts)
	return res, err, out.String(), errb.String()
}

// With a fake python that dumps a known snapshot, the trace is the
// snapshot's import, marked as a recorded program; output and exit status
// pass through.
func TestRecordProgramFake(t *testing.T) {
	fake, _ := filepath.Abs("testdata/fakepython.sh")
	out := filepath.Join(t.TempDir(), "run.arrows")
	res, err, stdout, stderr := runProgram(t, record.ProgramOptions{
		Args: []string{fake, "train.py", "--lr", "3e-4"}, Out: out, MaxEntries: 123, Stacks: "all",
		Env: fakeEnv("FAKE_EXIT=7", "PYTHONPATH=/keep/me"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 {
		t.Errorf("exit code %d, want 7", res.ExitCode)
	}
	if stdout != "out: train.py --lr 3e-4\n" || !strings.Contains(stderr, "PYTHONPATH=") || !strings.HasSuffix(strings.TrimSpace(stderr), ":/keep/me") {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	if len(res.Traces) != 1 || res.Traces[0].Out != out || res.Traces[0].Reason != "exit" || res.Traces[0].Events == 0 {
		t.Fatalf("traces %+v", res.Traces)
	}
	rd, err := trace.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	m := rd.Meta()
	if m.Source != trace.SourcePythonProgram || m.Extra["command"] != fake+" train.py --lr 3e-4" || m.Extra["exit_status"] != "7" || m.Extra["max_entries"] != "123" {
		t.Errorf("meta %+v", m)
	}
	n := int64(0)
	for rd.Next() {
		n++
	}
	if n != res.Traces[0].Events {
		t.Errorf("read %d events, recorded %d", n, res.Traces[0].Events)
	}
}

func TestRecordProgramProblems(t *testing.T) {
	fake, _ := filepath.Abs("testdata/fakepython.sh")
	for _, tc := range []struct {
		mode, reason, msg string
	}{
		{"no-torch", "no-torch", "nothing recorded: no torch: /usr/bin/fake cannot import torch"},
		{"no-cuda", "no-cuda", "nothing recorded: no GPU: torch 2.11.0-fake sees no CUDA device"},
	} {
		res, err, _, _ := runProgram(t, record.ProgramOptions{Args: []string{fake}, Env: fakeEnv("FAKE_MODE=" + tc.mode)})
		var pe *record.ProgramError
		if !errors.As(err, &pe) || pe.Reason != tc.reason || !strings.HasPrefix(pe.Msg, tc.msg) || res == nil || res.ExitCode != 0 {
			t.Errorf("%s: res %+v, err %v", tc.mode, res, err)
		}
	}
	// No such python.
	res, err, _, _ := runProgram(t, record.ProgramOptions{Args: []string{"python-that-does-not-exist"}})
	var pe *record.ProgramError
	if !errors.As(err, &pe) || pe.Reason != "no-python" || res != nil {
		t.Errorf("missing python: res %+v, err %v", res, err)
	}
	// Not python at all: the hook never runs.
	res, err, _, _ = runProgram(t, record.ProgramOptions{Args: []string{"sh", "-c", "exit 4"}})
	if !errors.As(err, &pe) || pe.Reason != "no-hook" || res.ExitCode != 4 {
		t.Errorf("sh: res %+v, err %v", res, err)
	}
}

// SIGTERM sent to tracer reaches the program, whose handler dumps before it
// exits; its status is passed on (143).
func TestRecordProgramForwardsSignals(t *testing.T) {
	fake, _ := filepath.Abs("testdata/fakepython.sh")
	sigs := make(chan os.Signal, 1)
	pr, pw, _ := os.Pipe()
	defer pr.Close()
	go func() {
		buf := make([]byte, 64)
		pr.Read(buf) // "out: ...", then "ready"
		time.Sleep(200 * time.Millisecond)
		sigs <- syscall.SIGTERM
	}()
	out := filepath.Join(t.TempDir(), "term.arrows")
	res, err := record.RecordProgram(context.Background(), record.ProgramOptions{
		Args: []string{fake}, Out: out, Env: fakeEnv("FAKE_MODE=wait"), Stdout: pw, Stderr: &bytes.Buffer{}, Signals: sigs,
	})
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 143 || len(res.Traces) != 1 || res.Traces[0].Reason != "sigterm" {
		t.Errorf("res %+v", res)
	}
}

// The real startup hook, run by the real python3 against a fake torch:
// history is switched on at CUDA's lazy init, and a snapshot is dumped at
// exit, on an exception, on an OOM, and on SIGTERM.
func TestHookWithFakeTorch(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	faketorch, _ := filepath.Abs("testdata/faketorch")
	prog := filepath.Join(faketorch, "program.py")
	// An existing sitecustomize must still run.
	site := t.TempDir()
	marker := filepath.Join(t.TempDir(), "site-ran")
	os.WriteFile(filepath.Join(site, "sitecustomize.py"), []byte("open(r'"+marker+"', 'w').write('yes')\n"), 0o644)
	for _, tc := range []struct {
		mode   string
		code   int
		reason string // "" = no trace; then the ProgramError reason
		log    string
	}{
		{"exit", 0, "exit", "cuda init\nrecord_memory_history enabled=all context=all stacks=python max_entries=1000000 init=True\ndump_snapshot\n"},
		{"exception", 1, "exception", ""},
		{"oom", 3, "oom", ""},
		{"sigterm", 128 + 15, "sigterm", ""},
		{"nocuda", 0, "cuda-unused", ""},
		{"notorch", 0, "no-torch-use", ""},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			os.Remove(marker)
			log := filepath.Join(t.TempDir(), "torch.log")
			res, err, stdout, stderr := runProgram(t, record.ProgramOptions{
				Args: []string{python, prog, tc.mode},
				Env:  fakeEnv("PYTHONPATH="+faketorch+string(os.PathListSeparator)+site, "FAKE_TORCH_LOG="+log),
			})
			if res == nil {
				t.Fatalf("err %v", err)
			}
			if res.ExitCode != tc.code || !strings.HasPrefix(stdout, "program "+tc.mode) {
				t.Errorf("exit %d (want %d), stdout %q, stderr %q", res.ExitCode, tc.code, stdout, stderr)
			}
			if len(res.Warnings) > 0 {
				t.Errorf("hook warnings: %v", res.Warnings)
			}
			var pe *record.ProgramError
			switch {
			case strings.HasPrefix(tc.reason, "no-") || tc.reason == "cuda-unused":
				if !errors.As(err, &pe) || pe.Reason != tc.reason {
					t.Errorf("err %v, want reason %s", err, tc.reason)
				}
			case err != nil:
				t.Fatal(err)
			case len(res.Traces) != 1 || res.Traces[0].Reason != tc.reason:
				t.Errorf("traces %+v, want one dumped at %s", res.Traces, tc.reason)
			}
			if got, _ := os.ReadFile(log); tc.log != "" && string(got) != tc.log {
				t.Errorf("torch calls:\n%s\nwant:\n%s", got, tc.log)
			}
			if b, _ := os.ReadFile(marker); string(b) != "yes" {
				t.Errorf("the existing sitecustomize did not run")
			}
		})
	}
}

// Without torch installed, the real hook reports it.
func TestHookNoTorch(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	if exec.Command(python, "-c", "import torch").Run() == nil {
		t.Skip("torch is installed")
	}
	res, err, _, _ := runProgram(t, record.ProgramOptions{Args: []string{python, "-c", "print('hi')"}})
	var pe *record.ProgramError
	if !errors.As(err, &pe) || pe.Reason != "no-torch" || res.ExitCode != 0 {
		t.Errorf("res %+v, err %v", res, err)
	}
}

// A snapshot that fails to import is kept beside the output, and the error
// says where: the run cannot be made again.
func TestRecordProgramKeepsSnapshot(t *testing.T) {
	fake, _ := filepath.Abs("testdata/fakepython.sh")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pickle")
	os.WriteFile(bad, []byte("\x80\x04not a whole pickle"), 0o644)
	out := filepath.Join(dir, "run.arrows")
	res, err, _, _ := runProgram(t, record.ProgramOptions{Args: []string{fake}, Out: out,
		Env: append(os.Environ(), "FAKE_SNAPSHOT="+bad)})
	if err == nil || res == nil {
		t.Fatalf("res %+v, err %v", res, err)
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "run.snapshot-*.pickle"))
	if len(kept) != 1 || !strings.Contains(err.Error(), "the snapshot is kept as "+kept[0]) {
		t.Fatalf("kept %v; err %v", kept, err)
	}
	if b, _ := os.ReadFile(kept[0]); string(b) != "\x80\x04not a whole pickle" {
		t.Errorf("kept snapshot holds %q", b)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a failed import left %s", out)
	}
}

// The temporary folder of a tracer that was killed is removed by the next
// recording, and a snapshot left in it is kept beside that run's output.
func TestRecordProgramSweepsKilledRuns(t *testing.T) {
	fake, _ := filepath.Abs("testdata/fakepython.sh")
	tmp, dir := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	stale := filepath.Join(tmp, "tracer-record-1073741824-123")
	os.Mkdir(stale, 0o700)
	earlier := filepath.Join(dir, "earlier.arrows")
	os.WriteFile(filepath.Join(stale, "output"), []byte(earlier), 0o600)
	os.WriteFile(filepath.Join(stale, "snapshot-77.pickle"), []byte("dumped"), 0o600)
	empty := filepath.Join(tmp, "tracer-record-1073741825-456") // killed before anything was dumped
	os.Mkdir(empty, 0o700)
	res, err, _, _ := runProgram(t, record.ProgramOptions{Args: []string{fake}, Out: filepath.Join(dir, "now.arrows"), Env: fakeEnv()})
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "earlier.snapshot-77.pickle")
	if b, _ := os.ReadFile(kept); string(b) != "dumped" {
		t.Errorf("the killed run's snapshot was not kept at %s", kept)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], kept) {
		t.Errorf("warnings %q", res.Warnings)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in the temporary directory: %v", ents)
	}
}

// A process the program leaves running is named in a warning.
func TestRecordProgramWarnsSurvivors(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("survivors are found through /proc")
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	res, _, _, _ := runProgram(t, record.ProgramOptions{Args: []string{"sh", "-c", "sleep 30 & echo $! > " + pidFile}})
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid > 0 {
		defer syscall.Kill(pid, syscall.SIGKILL)
	}
	if res == nil || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], fmt.Sprintf("process %d (sleep)", pid)) {
		t.Errorf("pid %d, res %+v", pid, res)
	}
}
