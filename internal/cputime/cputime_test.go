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
