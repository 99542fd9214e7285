/*
Package record captures GPU allocation events into traces, three ways:

  - Record runs a Workload live on tracer's caching allocator (package
    allocator) over a Target: a real GPU through the CUDA driver (package
    cuda: real cudaMalloc, real addresses, NVML's used memory sampled along
    the run into Event.DeviceUsed) or the simulated device. Every event the
    allocator emits is written with its time and the workload line that
    caused it (as the event's stack).
  - RecordProgram runs a PyTorch program unchanged, with memory history
    switched on from its start by a startup hook (hook.py), and imports the
    snapshot the program dumps when it ends, however it ends.
  - ImportSnapshots converts snapshot files (import.go), decoded by the
    subpackage torchsnap; the subpackage sample holds the trace built into
    the binary, one such import.

Live recordings are crash-safe: the trace grows in a partial file beside
its output (trace.WriterOptions.Live), renamed to the output at the end, and
a batch is flushed when it holds 64K events or is a second old, so a killed
`tracer record` leaves that partial file, a trace readable up to its last
batch, which trace.Reader reports as Truncated. A failing statement (an OOM
most often) or an interruption ends the trace normally, with everything up
to it.

# Workloads

A workload is a small text file, one statement per line; '#' starts a
comment. It describes what a program asks of the allocator, not what the
allocator does: the sizes, counts, streams and order of requests and frees.

	description 100 tensors of 10 MB, every other one freed
	alloc t 10MB count=100        # t[0] ... t[99]
	free t step=2                 # t[0], t[2], ...: 50 holes
	alloc big 200MB               # cannot use the holes

Statements:

	description TEXT          one line for --list-workloads; before any statement
	alloc NAME SIZE [count=N] [stream=S]
	                          N buffers of SIZE bytes (default 1) on stream S
	                          (default 0), appended to the group NAME
	free NAME [count=N] [from=I] [step=K] [reverse]
	                          free the group's live buffers at positions I,
	                          I+K, I+2K, ... (oldest first; I < 0 counts from
	                          the newest: from=-1 is the last allocated), at
	                          most N of them (default all); reverse frees
	                          them newest first, as `del list` does
	record_stream NAME stream=S
	                          every live buffer of NAME is also used on S
	                          (Tensor.record_stream): its free waits
	sync                      the streams' work is done
	                          (torch.cuda.synchronize()): pending frees
	                          complete at the next alloc
	empty_cache               torch.cuda.empty_cache()
	snapshot                  a snapshot marker in the trace (its size is
	                          the active bytes), to find phases later
	repeat N                  run the statements up to the matching `end`
	end                       N times; blocks nest
	                          (up to 32 deep)

SIZE and N are integer expressions: terms joined by + and -, each a product
of factors joined by *, each a decimal integer; a SIZE factor may carry a
unit: B, KB, MB, GB, TB (powers of 10) or KiB, MiB, GiB, TiB (powers of 2).
Examples: 516, 129*4, 2MiB+1, 10MB, count=4*1024*1024. A size is at least 1
byte and at most 2^50; counts at most 2^40. Names start with a letter and
hold letters, digits, '_', '-' and '.'.

Streams are numbers that the allocator model keys its pools by; no kernels
run, so a stream is a label (0 is the default stream). Errors name the file
and line ("my.workload:3: free b: no earlier alloc of "b""), and every
problem in a file is reported at once. A run stops at the first failing
statement: an out-of-memory (the trace ends with its oom event), or a free
of buffers that are not live.

The built-in workloads (Builtins, `tracer record --list-workloads`) are the
experiments of the articles tracer grew out of (shared/seeds): workloads/
holds them, with comments that say what each article measured.

# Programs

RecordProgram writes hook.py as sitecustomize.py into a private temporary
folder put first on PYTHONPATH (it runs, then chains to, any sitecustomize
it hides). When the program imports torch, the hook asks torch to run
torch.cuda.memory._record_memory_history(enabled="all", context="all",
stacks=..., max_entries=...) right after CUDA's lazy initialization, which
precedes the first allocation, and attaches an OOM observer. It dumps
snapshot-<pid>.pickle at exit, on an uncaught exception, on a CUDA OOM and
on SIGINT/SIGTERM (which tracer forwards to the program, then waits), and
appends what happened to a status file, from which tracer explains a missing
snapshot in one line: no python, no torch, no GPU, CUDA never used, first
saying that the program failed when it did (ProgramError.NothingUsed tells
these apart from a recording that failed). Every
Python process of the program that uses CUDA dumps its own snapshot
(torchrun ranks); with several, the traces are OUT-<pid>.arrows.
*/
package record
