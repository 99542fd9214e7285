// Package cputime reads CPU time (user and system) from the kernel: the
// process's, and the calling thread's, which measures one goroutine's work
// while it keeps its thread (runtime.LockOSThread). The stage reports of
// import and replay (TRACER_STAGES) and the benchmarks use it, because the
// wall clock counts the other stages' and processes' time as well.
package cputime
