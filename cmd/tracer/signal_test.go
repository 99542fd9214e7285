package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startTracer starts the binary in dir, with env added to its environment.
func startTracer(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(tracerBin(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	cmd.WaitDelay = time.Second // a program tracer left running may hold stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &errb
}

// waitExit waits at most d for cmd to end and returns its exit status, or
// kills it and fails.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatalf("tracer %v still ran %v later", cmd.Args[1:], d)
		return -1
	}
}

// An import stuck reading its input (a FIFO whose writer stalls) stops at
// SIGINT or SIGTERM, within the grace period, with 130 or 143, and leaves
// nothing.
func TestImportSignalled(t *testing.T) {
	snap, err := os.ReadFile(filepath.Join(snapshots, "mlp_train__default.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "s.pickle")
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Skip(err)
			}
			cmd, stderr := startTracer(t, dir, nil, "import", "s.pickle", "-o", "o.arrows")
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // once tracer reads it: it runs
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			w.Write(snap[:len(snap)/2])
			time.Sleep(100 * time.Millisecond)
			start := time.Now()
			cmd.Process.Signal(sig)
			code := waitExit(t, cmd, 10*time.Second)
			if code != 128+int(sig) || time.Since(start) > stopGrace+2*time.Second {
				t.Errorf("exit %d after %v, want %d; stderr %q", code, time.Since(start), 128+int(sig), stderr)
			}
			if want := (&interrupted{sig}).Error(); !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
			only(t, dir, "s.pickle")
		})
	}
}

// A kill -9 during an import or a replay's -o leaves no hidden temporary
// file: each run is killed as soon as anything but the decoder's scratch
// file shows in the folder, or after a few milliseconds.
func TestKilledLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(snapshots, "churn__split64__seed2.pickle"), dir+"/s.pickle")
	if code, _, stderr := execTracer(t, dir, "import", "s.pickle", "-o", "t.arrows"); code != 0 {
		t.Fatal(stderr)
	}
	inputs := map[string]bool{"s.pickle": true, "t.arrows": true}
	for _, args := range [][]string{
		{"import", "s.pickle", "-o", "o.arrows"},
		{"replay", "t.arrows", "--round", "4096", "-o", "o.arrows"},
	} {
		for _, after := range []time.Duration{0, 5 * time.Millisecond, 15 * time.Millisecond, 30 * time.Millisecond} {
			os.Remove(dir + "/o.arrows")
			cmd, _ := startTracer(t, dir, nil, args...)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			deadline := time.Now().Add(after)
		watch:
			for {
				select {
				case <-done:
					break watch
				default:
				}
				ents, _ := os.ReadDir(dir)
				seen := false
				for _, e := range ents {
					seen = seen || !inputs[e.Name()] && !strings.HasPrefix(e.Name(), ".tracer-spill-")
				}
				if seen || after > 0 && time.Now().After(deadline) {
					cmd.Process.Kill()
					<-done
					break
				}
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				switch {
				case inputs[e.Name()]:
				case e.Name() == "o.arrows":
					isTrace(t, dir+"/o.arrows") // it finished first: whole
				default:
					t.Errorf("tracer %v killed: left %s", args, e.Name())
					os.Remove(filepath.Join(dir, e.Name()))
				}
			}
		}
	}
}

// pidAlive reports whether process pid runs (a zombie does not).
func pidAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitPID reads the pid a program wrote into file.
func waitPID(t *testing.T, file string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(file)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return pid
		}
	}
	t.Fatal("the program never started")
	return 0
}

// stubborn is a program that ignores SIGINT and SIGTERM and writes its pid.
const stubborn = `trap "" INT TERM; echo $$ > pid; while :; do sleep 0.05; done`

// A recorded program that ignores SIGINT gets the first one and keeps
// running; the second kills it, and tracer ends.
func TestRecordProgramSecondSignalKills(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	dir := t.TempDir()
	cmd, stderr := startTracer(t, dir, []string{"TMPDIR=" + dir}, "record", "-o", "o.arrows", "--", "sh", "-c", stubborn)
	pid := waitPID(t, dir+"/pid")
	defer syscall.Kill(pid, syscall.SIGKILL)
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(stopGrace + 500*time.Millisecond)
	if !pidAlive(cmd.Process.Pid) || !pidAlive(pid) {
		t.Fatalf("the first SIGINT ended the run: the program decides; stderr %q", stderr)
	}
	cmd.Process.Signal(syscall.SIGINT)
	code := waitExit(t, cmd, 5*time.Second)
	if code != 128+int(syscall.SIGKILL) || !strings.Contains(stderr.String(), "killing sh") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if pidAlive(pid) {
		t.Errorf("the program (pid %d) outlived tracer", pid)
	}
	only(t, dir, "pid")
}

// A recorded program dies with a killed tracer; the next recording removes
// the temporary folder the killed one left.
func TestRecordProgramDiesWithTracer(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	dir := t.TempDir()
	tmp := t.TempDir()
	cmd, _ := startTracer(t, dir, []string{"TMPDIR=" + tmp}, "record", "-o", "o.arrows", "--", "sh", "-c", stubborn)
	pid := waitPID(t, dir+"/pid")
	defer syscall.Kill(pid, syscall.SIGKILL)
	cmd.Process.Kill()
	cmd.Wait()
	for deadline := time.Now().Add(3 * time.Second); pidAlive(pid) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if pidAlive(pid) {
		t.Errorf("the program (pid %d) runs on after tracer was killed", pid)
	}
	if left, _ := filepath.Glob(tmp + "/tracer-record-*"); len(left) != 1 {
		t.Fatalf("the killed tracer's folder: %v", left)
	}
	next, _ := startTracer(t, dir, []string{"TMPDIR=" + tmp}, "record", "-o", "o.arrows", "--", "true")
	if code := waitExit(t, next, 10*time.Second); code != 1 {
		t.Errorf("record -- true: exit %d", code)
	}
	only(t, tmp)
}

// SIGINT stops a workload's recording: what it recorded is kept, whole, at
// the output (a recording is not made again as an import is), with 130.
func TestRecordSignalled(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/long.workload", []byte("repeat 1000000000\n  alloc a 1KiB\n  free a\nend\n"), 0o644)
	cmd, stderr := startTracer(t, dir, nil, "record", "--workload", "long.workload", "--device", "sim", "-o", "r.arrows")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m, _ := filepath.Glob(dir + "/r.partial-*.arrows"); len(m) == 1 {
			break
		}
	}
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	if code := waitExit(t, cmd, 10*time.Second); code != 130 || !strings.Contains(stderr.String(), "interrupted (SIGINT)") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	b, _ := os.ReadFile(dir + "/r.arrows")
	if n, rest, err := readTraceRest(b); err != nil || rest != 0 || n == 0 {
		t.Errorf("r.arrows: %d events, %d bytes after them, %v", n, rest, err)
	}
	only(t, dir, "long.workload", "r.arrows")
}
