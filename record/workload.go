package record

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Parser limits. A workload is mostly a short hand-written file; these bound
// what a hostile or mistaken one can make the parser hold in memory. The run
// itself may execute billions of operations (counts and repeats multiply),
// which is the point of a workload, so only the text is bounded. A generated
// workload of distinct sizes takes a line per request (the growth
// benchmark's sizes-growing axis: 64,000 requests are 1.4 MB), so the file
// may be 8 MiB, which the parser holds in about 90 MB.
const (
	maxWorkloadBytes = 8 << 20 // whole file
	maxLineBytes     = 4096
	maxDepth         = 32 // nested repeat blocks
	maxErrors        = 10 // problems reported at once
	maxSize          = 1 << 50
	maxCount         = 1 << 40
	maxStream        = 1 << 32
)

// Workload is a parsed workload file: a list of statements that the live
// recorder executes against the caching allocator (see Record and the format
// in doc.go).
type Workload struct {
	Name        string // file base name without extension, or the built-in's name
	Description string // the `description` line; "" when absent
	File        string // the name positions are reported against ("fragment-10mb.workload")
	Source      []byte // the text it was parsed from

	body   []*stmt
	groups []string // buffer group names; stmt.group indexes it
	nstmt  int      // statements, for per-statement tables (stacks)
}

// op is what a statement does.
type op uint8

const (
	opAlloc op = iota + 1
	opFree
	opRecordStream
	opSync
	opEmptyCache
	opSnapshot
	opRepeat
)

// stmt is one statement. Only the fields of its op are set.
type stmt struct {
	op    op
	id    int    // 0..nstmt-1, in text order
	line  int    // 1-based
	text  string // the statement as written, for stacks and errors
	group int    // alloc, free, record_stream: index into Workload.groups

	size, count int64  // alloc: bytes per buffer and buffers (≥ 1)
	stream      uint64 // alloc, record_stream

	from, step int64 // free: first live index (negative: from the end), stride
	limit      int64 // free: at most this many buffers; 0 = no limit
	reverse    bool  // free: in reverse allocation order

	times int64   // repeat
	body  []*stmt // repeat
	outer []*stmt // enclosing repeats, innermost first (for stacks)
}

func (s *stmt) pos(w *Workload) string { return fmt.Sprintf("%s:%d", w.File, s.line) }

// ParseWorkload parses a workload. file names the source in error messages
// (file:line) and in the stacks of recorded events; the workload's name is
// its base name without extension. Every problem is reported at once (up to
// ten), joined with errors.Join.
func ParseWorkload(file string, src []byte) (*Workload, error) {
	w := &Workload{File: file, Source: src}
	base := filepath.Base(file)
	w.Name = strings.TrimSuffix(base, filepath.Ext(base))
	p := &parser{w: w, groups: map[string]int{}}
	if len(src) > maxWorkloadBytes {
		return nil, fmt.Errorf("%s: workload is %d bytes; the limit is %d", file, len(src), maxWorkloadBytes)
	}
	p.parse(string(src))
	if len(p.errs) > 0 {
		if p.more > 0 {
			p.errs = append(p.errs, fmt.Errorf("%s: ... and %d more problems", file, p.more))
		}
		return nil, errors.Join(p.errs...)
	}
	return w, nil
}

type parser struct {
	w      *Workload
	groups map[string]int
	stack  []*stmt // open repeat blocks
	errs   []error
	more   int
}

func (p *parser) errorf(line int, format string, args ...any) {
	if len(p.errs) >= maxErrors {
		p.more++
		return
	}
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s", p.w.File, line, fmt.Sprintf(format, args...)))
}

func (p *parser) parse(src string) {
	seenDesc := false
	for i, raw := range strings.Split(src, "\n") {
		line := i + 1
		if len(raw) > maxLineBytes {
			p.errorf(line, "line is %d bytes long; the limit is %d", len(raw), maxLineBytes)
			continue
		}
		text := raw
		if j := strings.IndexByte(text, '#'); j >= 0 {
			text = text[:j]
		}
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		verb, rest, _ := strings.Cut(text, " ")
		rest = strings.TrimSpace(rest)
		if verb == "description" {
			switch {
			case seenDesc:
				p.errorf(line, "a second description (one line per workload)")
			case p.w.nstmt > 0:
				p.errorf(line, "description must come before the first statement")
			}
			seenDesc = true
			p.w.Description = rest
			continue
		}
		s := &stmt{id: p.w.nstmt, line: line, text: strings.Join(strings.Fields(text), " ")}
		if !p.statement(s, verb, strings.Fields(rest)) {
			continue
		}
		if s.op == 0 { // `end`
			continue
		}
		p.w.nstmt++
		for k := len(p.stack) - 1; k >= 0; k-- {
			s.outer = append(s.outer, p.stack[k])
		}
		if n := len(p.stack); n > 0 {
			p.stack[n-1].body = append(p.stack[n-1].body, s)
		} else {
			p.w.body = append(p.w.body, s)
		}
		if s.op == opRepeat {
			if len(p.stack) >= maxDepth {
				p.errorf(line, "repeat blocks nest deeper than %d", maxDepth)
				continue
			}
			p.stack = append(p.stack, s)
		}
	}
	for _, r := range p.stack {
		p.errorf(r.line, "repeat without end")
	}
	if p.w.nstmt == 0 && len(p.errs) == 0 {
		p.errorf(1, "no statements (a workload needs at least one alloc)")
	}
}

// statement fills s from its verb and arguments; false when it reported an
// error. `end` closes a block and leaves s.op zero.
func (p *parser) statement(s *stmt, verb string, args []string) bool {
	opts, pos, ok := p.split(s.line, args)
	if !ok {
		return false
	}
	want := func(npos int, usage string, allowed ...string) bool {
		if len(pos) != npos {
			p.errorf(s.line, "%s: want %q", verb, usage)
			return false
		}
		for k := range opts {
			if !contains(allowed, k) {
				p.errorf(s.line, "%s: unknown option %q (usage: %s)", verb, k, usage)
				return false
			}
		}
		return true
	}
	var err error
	switch verb {
	case "alloc":
		const usage = "alloc NAME SIZE [count=N] [stream=S]"
		if !want(2, usage, "count", "stream") {
			return false
		}
		s.op, s.count = opAlloc, 1
		if !p.name(s, pos[0], true) {
			return false
		}
		if s.size, err = parseExpr(pos[1], true, maxSize); err != nil || s.size < 1 {
			p.errorf(s.line, "alloc: size %q: %v", pos[1], orPositive(err))
			return false
		}
		if v, ok := opts["count"]; ok {
			if s.count, err = parseExpr(v, false, maxCount); err != nil || s.count < 1 {
				p.errorf(s.line, "alloc: count=%s: %v", v, orPositive(err))
				return false
			}
		}
		if v, ok := opts["stream"]; ok {
			if s.stream, err = parseStream(v); err != nil {
				p.errorf(s.line, "alloc: stream=%s: %v", v, err)
				return false
			}
		}
	case "free":
		const usage = "free NAME [count=N] [from=I] [step=K] [reverse]"
		if !want(1, usage, "count", "from", "step", "reverse") {
			return false
		}
		s.op, s.step = opFree, 1
		if !p.name(s, pos[0], false) {
			return false
		}
		if v, ok := opts["count"]; ok {
			if s.limit, err = parseExpr(v, false, maxCount); err != nil || s.limit < 1 {
				p.errorf(s.line, "free: count=%s: %v", v, orPositive(err))
				return false
			}
		}
		if v, ok := opts["from"]; ok {
			neg := strings.HasPrefix(v, "-")
			if s.from, err = parseExpr(strings.TrimPrefix(v, "-"), false, maxCount); err != nil {
				p.errorf(s.line, "free: from=%s: %v", v, err)
				return false
			}
			if neg {
				if s.from == 0 {
					p.errorf(s.line, "free: from=-0: count from the end with from=-1 (the newest buffer)")
					return false
				}
				s.from = -s.from
			}
		}
		if v, ok := opts["step"]; ok {
			if s.step, err = parseExpr(v, false, maxCount); err != nil || s.step < 1 {
				p.errorf(s.line, "free: step=%s: %v", v, orPositive(err))
				return false
			}
		}
		if v, ok := opts["reverse"]; ok {
			if v != "" {
				p.errorf(s.line, "free: reverse takes no value")
				return false
			}
			s.reverse = true
		}
	case "record_stream":
		const usage = "record_stream NAME stream=S"
		if !want(1, usage, "stream") {
			return false
		}
		s.op = opRecordStream
		if !p.name(s, pos[0], false) {
			return false
		}
		v, ok := opts["stream"]
		if !ok {
			p.errorf(s.line, "record_stream: want %q", usage)
			return false
		}
		if s.stream, err = parseStream(v); err != nil {
			p.errorf(s.line, "record_stream: stream=%s: %v", v, err)
			return false
		}
	case "sync", "empty_cache", "snapshot":
		if !want(0, verb) {
			return false
		}
		s.op = map[string]op{"sync": opSync, "empty_cache": opEmptyCache, "snapshot": opSnapshot}[verb]
	case "repeat":
		if !want(1, "repeat N") {
			return false
		}
		s.op = opRepeat
		if s.times, err = parseExpr(pos[0], false, maxCount); err != nil || s.times < 1 {
			p.errorf(s.line, "repeat %s: %v", pos[0], orPositive(err))
			return false
		}
	case "end":
		if !want(0, "end") {
			return false
		}
		if len(p.stack) == 0 {
			p.errorf(s.line, "end without repeat")
			return false
		}
		if r := p.stack[len(p.stack)-1]; len(r.body) == 0 {
			p.errorf(r.line, "empty repeat block")
		}
		p.stack = p.stack[:len(p.stack)-1]
	default:
		p.errorf(s.line, "unknown statement %q (want alloc, free, record_stream, sync, empty_cache, snapshot, repeat or end)", verb)
		return false
	}
	return true
}

// split separates key=value options (and bare words used as flags, such as
// `reverse`) from positional arguments, which come first.
func (p *parser) split(line int, args []string) (opts map[string]string, pos []string, ok bool) {
	opts = map[string]string{}
	for _, a := range args {
		k, v, isOpt := strings.Cut(a, "=")
		if !isOpt && len(opts) == 0 && a != "reverse" {
			pos = append(pos, a)
			continue
		}
		if !isOpt {
			v = ""
		} else if v == "" {
			p.errorf(line, "option %s= has no value", k)
			return nil, nil, false
		}
		if _, dup := opts[k]; dup {
			p.errorf(line, "option %s given twice", k)
			return nil, nil, false
		}
		opts[k] = v
	}
	return opts, pos, true
}

// name checks a buffer group name and resolves it. Freeing or recording a
// group that no earlier line allocates is a typo, reported now rather than
// after a long run.
func (p *parser) name(s *stmt, name string, define bool) bool {
	if !validName(name) {
		p.errorf(s.line, "buffer name %q: use letters, digits, '_', '-' and '.', starting with a letter", name)
		return false
	}
	g, ok := p.groups[name]
	if !ok {
		if !define {
			p.errorf(s.line, "no earlier alloc of %q", name)
			return false
		}
		g = len(p.w.groups)
		p.groups[name] = g
		p.w.groups = append(p.w.groups, name)
	}
	s.group = g
	return true
}

func validName(s string) bool {
	if s == "" || len(s) > 64 || !isLetter(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !(c >= '0' && c <= '9') && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func orPositive(err error) error {
	if err != nil {
		return err
	}
	return errors.New("must be at least 1")
}

func parseStream(v string) (uint64, error) {
	n, err := parseExpr(v, false, maxStream)
	return uint64(n), err
}

// units are the byte suffixes a size may carry, longest first so that "MiB"
// is not read as "M" + "iB". Decimal units are powers of ten, binary ones
// powers of two, as in `tracer --limit` and the articles ("10MB" tensors).
var units = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// parseExpr evaluates a size or count: terms joined by '+' or '-', each a
// product of factors joined by '*', each a decimal integer with an optional
// unit (sizes only): "516", "129*4", "2MiB+1", "4*1024*1024", "10MB".
// Every intermediate value must stay within [0, limit].
func parseExpr(s string, sized bool, limit int64) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	var total int64
	sign := int64(1)
	for s != "" {
		end := strings.IndexAny(s, "+-")
		term := s
		if end >= 0 {
			term = s[:end]
		}
		v, err := parseTerm(term, sized, limit)
		if err != nil {
			return 0, err
		}
		total += sign * v
		if total < 0 || total > limit {
			return 0, fmt.Errorf("out of range [0, %d]", limit)
		}
		if end < 0 {
			break
		}
		sign = 1
		if s[end] == '-' {
			sign = -1
		}
		s = s[end+1:]
		if s == "" {
			return 0, errors.New("ends with an operator")
		}
	}
	return total, nil
}

func parseTerm(t string, sized bool, limit int64) (int64, error) {
	v := int64(1)
	for _, f := range strings.Split(t, "*") {
		n, err := parseFactor(f, sized)
		if err != nil {
			return 0, err
		}
		if n != 0 && v > limit/n {
			return 0, fmt.Errorf("out of range [0, %d]", limit)
		}
		v *= n
	}
	return v, nil
}

func parseFactor(f string, sized bool) (int64, error) {
	if f == "" {
		return 0, errors.New("missing number")
	}
	i := 0
	for i < len(f) && f[i] >= '0' && f[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a number", f)
	}
	n, err := strconv.ParseInt(f[:i], 10, 64)
	if err != nil || n > maxSize {
		return 0, fmt.Errorf("%q is too large", f[:i])
	}
	unit := f[i:]
	if unit == "" {
		return n, nil
	}
	if !sized {
		return 0, fmt.Errorf("%q: a count takes no unit", f)
	}
	for _, u := range units {
		if unit == u.suffix {
			if n > maxSize/u.mult {
				return 0, fmt.Errorf("%q is too large", f)
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("unknown unit %q (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)", unit)
}

// Statements reports how many statements the workload has, loops counted
// once.
func (w *Workload) Statements() int { return w.nstmt }

// RecordWorkloadSim parses the workload src (file names it in errors) and
// records it on the simulated device into the trace out: what `tracer
// record --workload` does, for the benchmarks and tests that need a trace
// of a given shape.
func RecordWorkloadSim(ctx context.Context, file string, src []byte, out string) error {
	w, err := ParseWorkload(file, src)
	if err != nil {
		return err
	}
	tg, err := OpenTarget("sim", 0, DefaultSimMemory)
	if err != nil {
		return err
	}
	defer tg.Close()
	_, err = Record(ctx, Options{Workload: w, Target: tg, Out: out})
	return err
}
