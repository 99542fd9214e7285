package record

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/cuda"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/trace"
)

// hookSource is the startup hook written as sitecustomize.py; its comments
// describe what it does and the status file it keeps.
//
//go:embed hook.py
var hookSource []byte

// DefaultMaxEntries is the history ring buffer of a recorded program: large
// enough for long training runs (PyTorch's entries are a few hundred bytes
// each, so a million is a few hundred MB at most), small enough not to grow
// without bound.
const DefaultMaxEntries = 1_000_000

// Stack modes of ProgramOptions.Stacks, as _record_memory_history takes them
// ("none" records no context at all).
var StackModes = []string{"python", "all", "none"}

// ProgramOptions configure RecordProgram.
type ProgramOptions struct {
	Args       []string // the program and its arguments: python train.py --lr 3e-4
	Out        string   // the trace; several processes that use CUDA write OUT-<pid>.arrows
	MaxEntries int      // history ring-buffer size (DefaultMaxEntries when 0)
	Stacks     string   // "python" (default), "all" (with C++ frames) or "none"
	// AllocConf, when not empty, is the program's PYTORCH_CUDA_ALLOC_CONF.
	AllocConf string

	Env    []string // the program's environment; os.Environ() when nil
	Stdin  io.Reader
	Stdout io.Writer // os.Stdout when nil; an *os.File is passed through as is
	Stderr io.Writer
	// Signals, when non-nil, replaces the SIGINT/SIGTERM notifications that
	// are forwarded to the program (tests send their own).
	Signals <-chan os.Signal
}

// ProgramResult is the outcome of RecordProgram.
type ProgramResult struct {
	// ExitCode is the program's exit status, or 128+N when signal N killed
	// it, as a shell reports it.
	ExitCode int
	Traces   []*ProgramTrace // one per process that dumped a snapshot, by pid
	Warnings []string        // problems the startup hook reported
}

// ProgramTrace is one imported process history.
type ProgramTrace struct {
	Out     string
	PID     int
	Reason  string // what made the process dump: exit, exception, oom, sigterm, sigint
	Events  int64
	Peak    Peaks
	Import  *ImportResult
	Command string
}

// Peaks are the highest reserved and allocated bytes of a trace, computed
// from its events. Allocated is exact when every alloc knew its block size
// (tracer's recordings); PyTorch's entries do not, so it is then the sum of
// rounded request sizes, off only for blocks that kept an unsplit remainder.
type Peaks struct {
	Reserved, Allocated int64
	Exact               bool
}

// ProgramError says why a program's memory could not be recorded. Reason
// is one of no-python, no-hook, no-torch, no-cuda, cuda-unused, no-torch-use,
// no-dump.
type ProgramError struct {
	Reason string
	Msg    string
}

func (e *ProgramError) Error() string { return e.Msg }

// RecordProgram runs a Python program with PyTorch's memory history
// switched on from its start and imports the snapshot it dumps at its end
// into a trace. The program runs unchanged: a startup hook (hook.py, put
// first on PYTHONPATH as sitecustomize.py in a private temporary folder)
// enables the history right after CUDA initializes and dumps it at exit, on
// an uncaught exception, on a CUDA OOM, and on SIGINT/SIGTERM, which are
// forwarded to the program. Its output and exit status pass through.
//
// The result is non-nil once the program ran, whatever the error: its
// ExitCode is what tracer should exit with. The error is a *ProgramError
// when there was nothing to record (no Python, no torch, no GPU, ...).
func RecordProgram(ctx context.Context, opts ProgramOptions) (*ProgramResult, error) {
	if len(opts.Args) == 0 {
		return nil, errors.New("record: no program to run")
	}
	if opts.Out == "" {
		opts.Out = "trace.arrows"
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Stacks == "" {
		opts.Stacks = "python"
	}
	if !contains(StackModes, opts.Stacks) {
		return nil, fmt.Errorf("record: stacks %q: want python, all or none", opts.Stacks)
	}
	// A folder of this process's pid: the next run removes it if this one
	// is killed (sweepRunDirs), and keeps the snapshots it holds.
	warnings := sweepRunDirs(os.TempDir())
	dir, err := os.MkdirTemp("", runDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), hookSource, 0o600); err != nil {
		return nil, fmt.Errorf("record: write startup hook: %w", err)
	}
	if abs, err := filepath.Abs(opts.Out); err == nil {
		os.WriteFile(filepath.Join(dir, "output"), []byte(abs), 0o600)
	}

	code, err := runChild(&opts, dir)
	if err != nil {
		return nil, err
	}
	res := &ProgramResult{ExitCode: code, Warnings: warnings}
	for _, p := range survivors(dir) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("process %s, started by the program, still runs after it: its memory history is not recorded", p))
	}
	st, err := readStatus(filepath.Join(dir, "status"))
	if err != nil {
		return res, fmt.Errorf("record: %w", err)
	}
	res.Warnings = append(res.Warnings, st.errors...)
	snaps, _ := filepath.Glob(filepath.Join(dir, "snapshot-*.pickle"))
	if len(snaps) == 0 {
		return res, st.why(opts.Args[0], code)
	}
	sort.Slice(snaps, func(i, j int) bool { return pidOf(snaps[i]) < pidOf(snaps[j]) })
	// The program is over: a signal that stopped it must not stop the import.
	ctx = context.WithoutCancel(ctx)
	name, total := deviceInfo()
	var first error
	for _, snap := range snaps {
		pid := pidOf(snap)
		out := opts.Out
		if len(snaps) > 1 {
			ext := filepath.Ext(out)
			out = fmt.Sprintf("%s-%d%s", strings.TrimSuffix(out, ext), pid, ext)
		}
		pt := &ProgramTrace{Out: out, PID: pid, Reason: st.reason[pid], Command: shellQuote(opts.Args)}
		extra := map[string]string{
			"command":     pt.Command,
			"pid":         strconv.Itoa(pid),
			"exit_status": strconv.Itoa(code),
			"dump_reason": pt.Reason,
			"max_entries": strconv.Itoa(opts.MaxEntries),
			"stacks":      opts.Stacks,
		}
		imp, err := ImportSnapshots(ctx, []string{snap}, ImportOptions{Out: out, DeviceName: name, DeviceTotal: total,
			Source: trace.SourcePythonProgram, Extra: extra})
		if err == nil {
			pt.Import = imp[0]
			pt.Events, pt.Peak, err = measure(out)
		}
		if err != nil {
			// The run cannot be made again: keep what it dumped.
			if kept, kerr := keepSnapshot(snap, out, pid); kerr != nil {
				err = fmt.Errorf("record: %w (and the snapshot could not be kept: %v)", err, kerr)
			} else {
				err = fmt.Errorf("record: %w; the snapshot is kept as %s", err, kept)
			}
			if first == nil {
				first = err
			} else {
				res.Warnings = append(res.Warnings, err.Error())
			}
			continue
		}
		res.Traces = append(res.Traces, pt)
	}
	return res, first
}

// runDirPrefix begins the names of RecordProgram's temporary folders,
// followed by tracer's pid.
const runDirPrefix = "tracer-record-"

// keepSnapshot moves the snapshot of process pid, which did not become the
// trace out, beside out: out's name without its extension, then
// .snapshot-PID.pickle ("-" and devices: in the current folder).
func keepSnapshot(snap, out string, pid int) (string, error) {
	base := strings.TrimSuffix(out, filepath.Ext(out))
	if outfile.Direct(out) {
		base = "tracer"
	}
	kept := fmt.Sprintf("%s.snapshot-%d.pickle", base, pid)
	if err := outfile.Check(kept, snap); err != nil {
		return "", err
	}
	if os.Rename(snap, kept) == nil {
		return kept, nil
	}
	// Another file system: copy.
	in, err := os.Open(snap)
	if err != nil {
		return "", err
	}
	defer in.Close()
	o, err := outfile.Create(kept)
	if err != nil {
		return "", err
	}
	if _, err = io.Copy(o.File(), in); err == nil {
		err = o.Commit()
	}
	if err != nil {
		o.Abort()
		return "", err
	}
	return kept, nil
}

// sweepRunDirs removes the temporary folders in tmp of RecordProgram runs
// whose tracer is gone (killed), keeping each snapshot they hold beside
// the output that run was writing, and says so.
func sweepRunDirs(tmp string) []string {
	ents, _ := os.ReadDir(tmp)
	var warnings []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), runDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		p, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(p)
		if err != nil || pid <= 0 || pid == os.Getpid() || running(pid) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		out, err := os.ReadFile(filepath.Join(dir, "output"))
		snaps, _ := filepath.Glob(filepath.Join(dir, "snapshot-*.pickle"))
		if len(snaps) > 0 && err != nil {
			continue // nowhere known to keep them: leave the folder
		}
		kept := true
		for _, snap := range snaps {
			k, err := keepSnapshot(snap, string(out), pidOf(snap))
			if err != nil {
				kept = false
				continue
			}
			warnings = append(warnings, fmt.Sprintf("a recording killed before it imported its snapshot left %s", k))
		}
		if kept {
			os.RemoveAll(dir)
		}
	}
	return warnings
}

// runChild runs the program with the hook set up and returns its exit
// status. The first SIGINT or SIGTERM is forwarded: the program decides
// when it ends (the hook dumps first), and tracer waits for it. A second
// one kills it (SIGKILL). The program dies with tracer (childAttr).
func runChild(opts *ProgramOptions, dir string) (int, error) {
	cmd := exec.Command(opts.Args[0], opts.Args[1:]...)
	cmd.Env = childEnv(opts, dir)
	cmd.SysProcAttr = childAttr()
	// Output copied through a pipe (Stdout not a file) is waited for only
	// so long once the program is gone: a process it left running may hold
	// the pipe for ever.
	cmd.WaitDelay = time.Second
	// The signal that childAttr asks for comes when the thread that started
	// the program ends, not the process: keep this one until it is over.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opts.Stdin, opts.Stdout, opts.Stderr
	if cmd.Stdin == nil {
		cmd.Stdin = os.Stdin
	}
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	sigs := opts.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 4)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(ch)
		sigs = ch
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return 0, &ProgramError{Reason: "no-python", Msg: fmt.Sprintf("%s: command not found (is Python installed and on PATH?)", opts.Args[0])}
		}
		return 0, fmt.Errorf("record: start %s: %w", opts.Args[0], err)
	}
	done := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			select {
			case s := <-sigs:
				if n == 0 {
					_ = cmd.Process.Signal(s)
					continue
				}
				fmt.Fprintf(cmd.Stderr, "tracer: %v again: killing %s (its memory history is lost)\n", s, opts.Args[0])
				_ = cmd.Process.Kill()
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		return 0, nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, fmt.Errorf("record: %s: %w", opts.Args[0], err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ee.ExitCode(), nil
}

func childEnv(opts *ProgramOptions, dir string) []string {
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	set := map[string]string{
		"TRACER_HOOK_DIR":         dir,
		"TRACER_HOOK_STATUS":      filepath.Join(dir, "status"),
		"TRACER_HOOK_MAX_ENTRIES": strconv.Itoa(opts.MaxEntries),
		"TRACER_HOOK_STACKS":      opts.Stacks,
		"PYTHONPATH":              dir,
	}
	if opts.AllocConf != "" {
		set["PYTORCH_CUDA_ALLOC_CONF"] = opts.AllocConf
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PYTHONPATH" && v != "" {
			set[k] = dir + string(os.PathListSeparator) + v
			continue
		}
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+set[k])
	}
	return out
}

// hookStatus is what the startup hooks of the program's processes reported.
type hookStatus struct {
	words  map[string]string // first detail per status word, over all processes
	reason map[int]string    // per pid: why it dumped
	errors []string
}

func readStatus(path string) (*hookStatus, error) {
	st := &hookStatus{words: map[string]string{}, reason: map[int]string{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 3)
		if len(fields) < 2 {
			continue
		}
		pid, _ := strconv.Atoi(fields[0])
		word, detail := fields[1], ""
		if len(fields) == 3 {
			detail = fields[2]
		}
		if _, ok := st.words[word]; !ok {
			st.words[word] = detail
		}
		switch word {
		case "dumped":
			if i := strings.LastIndexByte(detail, ' '); i >= 0 {
				st.reason[pid] = detail[i+1:]
			}
		case "error":
			st.errors = append(st.errors, fmt.Sprintf("python process %d: %s", pid, detail))
		}
	}
	return st, sc.Err()
}

// why explains, in one line, why no snapshot came back.
func (st *hookStatus) why(prog string, code int) error {
	has := func(w string) bool { _, ok := st.words[w]; return ok }
	e := func(reason, format string, args ...any) error {
		return &ProgramError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
	}
	// A program that failed before torch did anything failed on its own:
	// say so first, its output tells why.
	failed := ""
	if code != 0 {
		failed = fmt.Sprintf("%s exited with status %d (its output above says why); ", prog, code)
	}
	switch {
	case !has("started"):
		return e("no-hook", "%s did not load tracer's startup hook: is it CPython, run without -S or -I? (exit status %d)", prog, code)
	case has("no-torch") && !has("torch"):
		return e("no-torch", "%snothing recorded: no torch: %s cannot import torch (pip install torch)", failed, st.words["no-torch"])
	case has("no-cuda") && !has("recording"):
		return e("no-cuda", "%snothing recorded: no GPU: torch %s sees no CUDA device (torch.cuda.is_available() is False)", failed, st.words["torch"])
	case has("recording"):
		return e("no-dump", "the program ended without dumping its memory history (killed? exit status %d)", code)
	case has("cuda-unused"):
		return e("cuda-unused", "%snothing recorded: the program never used CUDA", failed)
	case has("torch"):
		return e("no-torch-use", "%snothing recorded: torch was imported but CUDA never initialized before the program ended", failed)
	}
	return e("no-torch-use", "%snothing recorded: the program never imported torch", failed)
}

// NothingUsed reports whether the program ran but never gave the caching
// allocator anything to record (no torch, no GPU, CUDA unused): not a
// failure of the recording when the program itself succeeded.
func (e *ProgramError) NothingUsed() bool {
	switch e.Reason {
	case "no-torch", "no-cuda", "cuda-unused", "no-torch-use":
		return true
	}
	return false
}

func pidOf(snap string) int {
	base := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(snap), "snapshot-"), ".pickle")
	n, _ := strconv.Atoi(base)
	return n
}

// deviceInfo names the GPU the program most likely used (its first visible
// one), for the trace's metadata; empty when NVML cannot tell.
func deviceInfo() (string, int64) {
	idx := nvmlIndex(0)
	if idx < 0 {
		return "", 0
	}
	info, err := cuda.Query(idx)
	if err != nil {
		return "", 0
	}
	return info.Name, info.TotalBytes
}

// measure reads a recorded trace back for the summary line: its events and
// its reserved and allocated peaks.
func measure(path string) (int64, Peaks, error) {
	rd, err := trace.Open(path)
	if err != nil {
		return 0, Peaks{}, err
	}
	defer rd.Close()
	conf, err := allocator.ParseConf(rd.Meta().AllocConf)
	if err != nil {
		conf = allocator.DefaultConf()
	}
	pk := newPeakTally(conf.RoundSize)
	var n int64
	for rd.Next() {
		pk.add(rd.Event())
		n++
	}
	return n, pk.peaks(), rd.Err()
}

// peakTally follows reserved and allocated bytes through a trace.
type peakTally struct {
	round          func(int64) int64
	live           map[uint64]int64 // addr → block bytes (allocated, not yet free_requested)
	reserved, allc int64
	p              Peaks
}

func newPeakTally(round func(int64) int64) *peakTally {
	return &peakTally{round: round, live: map[uint64]int64{}, p: Peaks{Exact: true}}
}

func (t *peakTally) add(ev *trace.Event) {
	switch ev.Kind {
	case trace.KindSegmentAlloc, trace.KindSegmentMap:
		t.reserved += ev.Size
	case trace.KindSegmentFree, trace.KindSegmentUnmap:
		t.reserved -= ev.Size
	case trace.KindAlloc:
		b := ev.BlockSize
		if b == 0 {
			b, t.p.Exact = t.round(ev.Size), false
		}
		t.live[ev.Addr] = b
		t.allc += b
	case trace.KindFreeRequested:
		t.allc -= t.live[ev.Addr]
		delete(t.live, ev.Addr)
	}
	t.p.Reserved = max(t.p.Reserved, t.reserved)
	t.p.Allocated = max(t.p.Allocated, t.allc)
}

func (t *peakTally) peaks() Peaks { return t.p }

// shellQuote renders args as a shell command line, for the record.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
