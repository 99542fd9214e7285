package cputime

import (
	"runtime"
	"testing"
)

// Both clocks advance over a busy loop on a locked thread, and the
// thread's never passes the process's.
func TestClocks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread CPU time is read on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p0, t0 := Process(), Thread()
	x := 0
	for i := 0; Thread()-t0 < 20e6 && i < 1e9; i++ {
		x += i
	}
	p, th := Process()-p0, Thread()-t0
	if th < 20e6 || p < th/2 {
		t.Fatalf("after a busy loop (%d): thread %v, process %v", x, th, p)
	}
}

// Writing fresh pages on a locked thread counts a minor fault each (at
// least most of them: some may come from huge pages).
func TestThreadFaults(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread faults are read on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const pages = 1024
	b := make([]byte, pages<<12)
	f0 := ThreadFaults()
	for i := 0; i < len(b); i += 1 << 12 {
		b[i] = 1
	}
	if got := ThreadFaults() - f0; got < pages/8 {
		t.Fatalf("writing %d fresh pages: %d minor faults on the thread", pages, got)
	}
}
