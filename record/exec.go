package record

import (
	"context"
	"fmt"

	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/trace"
)

// StatementError is a workload statement that failed: out of memory (the
// error wraps allocator.ErrOOM), a free of buffers that are not live, or a
// device failure. The recording up to and including the failure (PyTorch's
// oom event, for an OOM) is in the trace.
type StatementError struct {
	Pos  string // "fragment-10mb.workload:14"
	Stmt string // the statement as written
	Err  error
}

func (e *StatementError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Pos, e.Stmt, e.Err) }
func (e *StatementError) Unwrap() error { return e.Err }

// checkEvery is how many allocator operations run between checks for
// cancellation and progress: rare enough to cost nothing per operation,
// frequent enough (microseconds apart) to stop at once.
const checkEvery = 1024

// executor runs a workload's statements against an allocator. Buffers are
// kept per group, in allocation order, so that `free` can pick them by
// position as a program drops list entries.
type executor struct {
	ctx     context.Context
	w       *Workload
	a       *allocator.Allocator
	live    []liveList    // per group: addresses of live buffers, oldest first
	pending []pendingFree // freed blocks awaiting their record_stream events
	sel     []int         // the selected buffers' indexes in their liveList

	// setStmt tells the recorder which statement the next events belong to;
	// nil when nothing records (benchmarks).
	setStmt func(*stmt)
	// snapshot writes a snapshot marker; tick runs every checkEvery operations.
	snapshot func() error
	tick     func(s *stmt) error
	ops      int
}

// pendingFree is a freed block awaiting its record_stream events.
type pendingFree struct {
	addr uint64
	h    allocator.Handle
}

func newExecutor(ctx context.Context, w *Workload, a *allocator.Allocator) *executor {
	return &executor{ctx: ctx, w: w, a: a, live: make([]liveList, len(w.groups))}
}

// run executes the workload from the start.
func (x *executor) run() error { return x.block(x.w.body) }

func (x *executor) block(body []*stmt) error {
	for _, s := range body {
		if err := x.exec(s); err != nil {
			return err
		}
	}
	return nil
}

func (x *executor) fail(s *stmt, err error) error {
	return &StatementError{Pos: s.pos(x.w), Stmt: s.text, Err: err}
}

// step counts one allocator operation and, every checkEvery, checks for
// cancellation and lets the recorder report progress.
func (x *executor) step(s *stmt) error {
	x.ops++
	if x.ops%checkEvery != 0 {
		return nil
	}
	if err := x.ctx.Err(); err != nil {
		return fmt.Errorf("interrupted at %s: %w", s.pos(x.w), err)
	}
	if x.tick != nil {
		return x.tick(s)
	}
	return nil
}

func (x *executor) exec(s *stmt) error {
	if x.setStmt != nil && s.op != opRepeat {
		x.setStmt(s)
	}
	switch s.op {
	case opAlloc:
		g := &x.live[s.group]
		for i := int64(0); i < s.count; i++ {
			addr, h, err := x.a.MallocHandle(s.size, s.stream)
			if err != nil {
				return x.fail(s, err)
			}
			g.push(addr, h)
			if err := x.step(s); err != nil {
				return err
			}
		}
	case opFree:
		return x.free(s)
	case opRecordStream:
		g := &x.live[s.group]
		if g.Len() == 0 {
			return x.fail(s, fmt.Errorf("no live %s buffers", x.w.groups[s.group]))
		}
		var err error
		g.each(func(addr uint64, h allocator.Handle) bool {
			err = x.a.RecordStreamHandle(addr, h, s.stream)
			return err == nil
		})
		if err != nil {
			return x.fail(s, err)
		}
	case opSync:
		// The streams' work is done: every pending free's events complete,
		// and the next malloc returns those blocks (process_events), as
		// after torch.cuda.synchronize().
		for _, p := range x.pending {
			x.a.MarkEventsDoneHandle(p.addr, p.h)
		}
		x.pending = x.pending[:0]
	case opEmptyCache:
		if err := x.a.EmptyCache(); err != nil {
			return x.fail(s, err)
		}
		x.prunePending()
	case opSnapshot:
		if x.snapshot != nil {
			if err := x.snapshot(); err != nil {
				return x.fail(s, err)
			}
		}
	case opRepeat:
		for i := int64(0); i < s.times; i++ {
			if err := x.block(s.body); err != nil {
				return err
			}
			if err := x.ctx.Err(); err != nil {
				return fmt.Errorf("interrupted at %s: %w", s.pos(x.w), err)
			}
		}
	default:
		panic(fmt.Sprintf("invariant violation: statement op %d", s.op))
	}
	return nil
}

// free releases the selected live buffers of a group: positions from,
// from+step, ... (from counts from the end when negative), at most limit of
// them, oldest first or, with reverse, newest first. Its cost is that of
// the buffers it frees, O(log n) each, whatever the group's length.
func (x *executor) free(s *stmt) error {
	g := &x.live[s.group]
	n := int64(g.Len())
	start := s.from
	if start < 0 {
		start += n
	}
	if n == 0 {
		return x.fail(s, fmt.Errorf("no live %s buffers", x.w.groups[s.group]))
	}
	if start < 0 || start >= n {
		return x.fail(s, fmt.Errorf("%d live %s buffers, none at position %d", n, x.w.groups[s.group], s.from))
	}
	sel := (n - start + s.step - 1) / s.step
	if s.limit > 0 && sel > s.limit {
		sel = s.limit
	}
	// The positions are those before this statement: find them all first.
	x.sel = x.sel[:0]
	for k := range sel {
		p := start + k*s.step
		if s.reverse {
			p = start + (sel-1-k)*s.step
		}
		x.sel = append(x.sel, g.index(int(p)))
	}
	// Each buffer is dropped from the list once freed, so that a failure
	// (or an interruption) leaves the list describing exactly the live ones.
	var err error
	for _, i := range x.sel {
		addr, h := g.at(i)
		pending, e := x.a.FreeHandlePending(addr, h)
		if e != nil {
			err = x.fail(s, e)
			break
		}
		g.drop(i)
		if pending {
			x.pending = append(x.pending, pendingFree{addr, h})
		}
		if err = x.step(s); err != nil {
			break
		}
	}
	g.compact()
	return err
}

// prunePending forgets pending blocks that a flush completed: empty_cache
// synchronizes and frees every pending block first (§7.3).
func (x *executor) prunePending() {
	out := x.pending[:0]
	for _, p := range x.pending {
		if x.a.PendingHandle(p.addr, p.h) {
			out = append(out, p)
		}
	}
	x.pending = out
}

// statements lists every statement of w, in text order (index = stmt.id).
func (w *Workload) statements() []*stmt {
	all := make([]*stmt, 0, w.nstmt)
	var walk func([]*stmt)
	walk = func(b []*stmt) {
		for _, s := range b {
			all = append(all, s)
			walk(s.body)
		}
	}
	walk(w.body)
	return all
}

// stack is the call stack recorded with the events of s: the statement,
// then the repeat blocks around it, innermost first, as PyTorch stores
// Python frames. Sites in `tracer analyze` then name workload lines.
func (s *stmt) stack(w *Workload) trace.Stack {
	st := trace.Stack{{Name: s.text, File: w.File, Line: int32(s.line)}}
	for _, o := range s.outer {
		st = append(st, trace.Frame{Name: o.text, File: w.File, Line: int32(o.line)})
	}
	return st
}
