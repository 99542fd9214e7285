package record

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// childAttr ties a recorded program's life to tracer's: the kernel kills
// it when tracer dies (SIGKILL included), rather than leaving it to run on
// with no one to import its history.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// survivors names the processes still running whose environment holds
// the run's hook folder (TRACER_HOOK_DIR=dir): those the program started,
// at any depth, that outlive it. Their history, dumped after tracer looked,
// is lost.
func survivors(dir string) []string {
	marker := []byte("TRACER_HOOK_DIR=" + dir + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, p := range procs {
		env, err := os.ReadFile(filepath.Join(p, "environ"))
		if err != nil || !bytes.Contains(env, marker) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(p, "comm"))
		out = append(out, fmt.Sprintf("%s (%s)", filepath.Base(p), bytes.TrimSpace(comm)))
	}
	return out
}

// running reports whether process pid exists.
func running(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
