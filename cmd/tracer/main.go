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
	"syscall"

	"github.com/tracer-dev/tracer/internal/textpages"
)

func main() {
	// Initialization touched pages of nearly every package linked in;
	// let only those the command uses stay resident (see textpages).
	textpages.Release()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit status:
// 0 success, 1 failure, 2 usage error. Errors are printed once, on one line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		fmt.Fprintf(stderr, "tracer: %v\nRun 'tracer --help' for usage.\n", err)
		return 2
	}
	var ex *exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintf(stderr, "tracer: %s\n", ex.msg)
		}
		return ex.code
	}
	fmt.Fprintf(stderr, "tracer: %v\n", err)
	return 1
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
