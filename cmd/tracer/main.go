// Command tracer records, imports, replays and analyzes GPU memory allocation
// traces of PyTorch's CUDA caching allocator. See doc.go for usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/tracer-dev/tracer/internal/gcpace"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/internal/textpages"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/plots"
)

func main() {
	// Initialization touched pages of nearly every package linked in, and
	// gonum/plot's parsed the plot fonts; let only those the command uses
	// stay resident (see textpages and plots.EmbeddedFonts).
	textpages.Release(plots.EmbeddedFonts()...)
	// A heap of many live blocks grows by a bounded amount between
	// collections, not by as much again (see gcpace).
	gcpace.Start()
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go stopOn(sigs, cancel, os.Stderr)
	stop := startProfile(os.Stderr)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interrupted is the cause of a command's context cancelled by a signal.
type interrupted struct{ sig syscall.Signal }

func (e *interrupted) Error() string {
	if e.sig == syscall.SIGINT {
		return "interrupted (SIGINT)"
	}
	return "stopped (SIGTERM)" // the only other signal stopOn is sent
}

// status is the exit status of a process that a signal stopped.
func (e *interrupted) status() int { return 128 + int(e.sig) }

// stopGrace is how long a command has, after the first signal, to stop and
// remove what it was writing before the process ends anyway.
const stopGrace = 3 * time.Second

// forwarding is set while a command hands signals to a program it runs
// (record -- PROGRAM): the program decides when it ends, and stopOn does
// not end the process.
var forwarding atomic.Bool

// stopOn cancels the command's context at the first SIGINT or SIGTERM:
// every command stops between two pieces of work, removes what it was
// writing, and run returns 130 or 143. A command stuck in a system call (a
// FIFO that no one opens) that has not returned stopGrace later, or a
// second signal, ends the process: outputs are unnamed files until they
// are complete (internal/outfile), so nothing half-written stays.
func stopOn(sigs <-chan os.Signal, cancel context.CancelCauseFunc, stderr io.Writer) {
	s, _ := (<-sigs).(syscall.Signal)
	cause := &interrupted{s}
	cancel(cause)
	grace := time.After(stopGrace)
	for {
		select {
		case <-sigs:
		case <-grace:
		}
		if !forwarding.Load() {
			fmt.Fprintf(stderr, "tracer: %v\n", cause)
			os.Exit(cause.status())
		}
	}
}

// run executes one command line and returns the process exit status:
// 0 success, 1 failure, 2 usage error, 128+N after signal N stopped the
// command. Errors are printed once, on one line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	err = commandError(root, err)
	var ex *exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintf(stderr, "tracer: %s\n", ex.msg)
		}
		return ex.code
	}
	var sig *interrupted
	if errors.As(context.Cause(ctx), &sig) {
		fmt.Fprintf(stderr, "tracer: %v\n", sig)
		return sig.status()
	}
	var ue *usageError
	var ce *outfile.ConflictError
	var se *pipeline.SettingsError
	if errors.As(err, &ue) || errors.As(err, &ce) || errors.As(err, &se) || isCobraUsage(err) {
		fmt.Fprintf(stderr, "tracer: %s\nRun 'tracer --help' for usage.\n", clipLine(err.Error()))
		return 2
	}
	fmt.Fprintf(stderr, "tracer: %s\n", clipLine(err.Error()))
	return 1
}

// maxLine bounds an error line: a value echoed in it (a conf string, a
// token of one) may be any size.
const maxLine = 400

// clipLine cuts msg to maxLine bytes, saying how long it was.
func clipLine(msg string) string {
	if len(msg) <= maxLine {
		return msg
	}
	cut := maxLine
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", msg[:cut], len(msg))
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitError carries a specific exit status (e.g. a recorded program's own).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
