package torchsnap

import (
	"github.com/tracer-dev/tracer/trace"
)

// commit adds chunk c's decoding to the builder: its strings, frames and
// stacks in the order the sequential machine would have added them, its memo
// slots, and the global stack ids of its events.
func (r *region) commit(c *chunk) error {
	b := r.b
	res := c.res
	if res.n == 0 && len(res.memo.k) == 0 {
		return nil
	}
	if b.memo.n != c.memoBase || (!res.stopped && res.n != c.entries) {
		return errParFallback
	}
	strMap := make([]int32, len(res.strs))
	for i, s := range res.strs {
		strMap[i] = r.intern(s)
	}
	frameMap := make([]int32, len(res.frames))
	for i, f := range res.frames {
		frameMap[i] = r.frame(f)
	}
	resolveFrame := func(f value) (int32, error) {
		switch f.k {
		case vFrame:
			return int32(f.i), nil
		case vLFrame:
			return frameMap[f.i], nil
		case vExt:
			g, ok := b.memo.get(uint64(f.i))
			if !ok || g.k != vFrame {
				return 0, errParFallback
			}
			return int32(g.i), nil
		}
		return 0, errParFallback
	}
	stackMap := make([]trace.StackID, len(res.stacks))
	var ids []int32
	for i, st := range res.stacks {
		if st.isExt {
			g, ok := b.memo.get(st.ext)
			if !ok || (g.k != vList && g.k != vTuple) {
				return errParFallback
			}
			id, err := b.stackOf(g)
			if err != nil {
				return errParFallback
			}
			stackMap[i] = id
			continue
		}
		ids = ids[:0]
		for _, f := range st.frames {
			id, err := resolveFrame(f)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		stackMap[i] = b.internStack(ids)
	}
	// The slots: the worker's local kinds (rare past a file's first
	// entries) become the builder's, the rest is stored as it is.
	ks, vs := res.memo.k, res.memo.v[:len(res.memo.k)]
	for i, k := range ks {
		if k < vLStr {
			continue
		}
		v := value{k, vs[i]}
		switch k {
		case vLStr:
			v = value{vStr, int64(strMap[v.i])}
		case vLFrame:
			v = value{vFrame, int64(frameMap[v.i])}
		case vLList:
			l := &res.lists[v.i]
			if l.stack != -2 && deriveFrames {
				// A frames list made into a stack: compact, as the
				// sequential machine keeps it (listStore).
				st := trace.StackID(l.stack)
				if st != trace.NoStack {
					st = stackMap[st]
				}
				v = value{vList, b.lists.addFrames(int32(st))}
				break
			}
			vals := make([]value, len(l.frames))
			for j, f := range l.frames {
				id, err := resolveFrame(f)
				if err != nil {
					return err
				}
				vals[j] = value{vFrame, int64(id)}
			}
			nv := b.newList(vList, vals)
			if l.stack != -2 {
				st := trace.StackID(l.stack)
				if st != trace.NoStack {
					st = stackMap[st]
				}
				b.lists.at(nv.i).stack = int32(st)
			}
			v = nv
		default: // vOpen, or a kind never memoized
			return errParFallback
		}
		ks[i], vs[i] = v.k, v.i
	}
	b.memo.putRun(ks, vs)
	// The events' stack ids, on a goroutine of the chunk's own: the rewrite
	// reads and writes a cache line of every event, which a worker wrote on
	// another core, and the commits are the part of a region that does not
	// run in parallel, so they only make the map. run waits for these
	// goroutines before the region ends.
	fixed := closedChan
	if res.n > 0 && len(stackMap) > 0 {
		done := make(chan struct{})
		fixed = done
		r.fixes.Add(1)
		go func(n int, recs []srec) {
			defer r.fixes.Done()
			if recs != nil {
				fixRecStacks(recs[:n], stackMap)
			} else {
				fixStacks(c.dst, n, stackMap)
			}
			close(done)
		}(res.n, c.recs)
	}
	if r.packq != nil && res.n > 0 {
		j := packJob{lo: c.firstEvent, hi: c.firstEvent + int64(res.n), ok: true, fixed: fixed}
		if c.recs != nil {
			j.recs, j.free, c.recs = c.recs[:res.n], r.recFree, nil
		} else {
			j.ok = b.events.baseAt(c.dst, c.firstEvent)
		}
		r.packq <- j
	} else if c.recs != nil {
		// No events to pack (an empty chunk): none were written.
		r.freeRecs(c)
	}
	return nil
}

// closedChan is a closed channel: a chunk's stack ids needing no fix.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// fixStacks maps the stack ids of the first n events of dst, a chunk's
// reserved events, from the worker's to the builder's.
func fixStacks(dst [][]cev, n int, stackMap []trace.StackID) {
	for _, seg := range dst {
		if n == 0 {
			break
		}
		seg = seg[:min(n, len(seg))]
		for k := range seg {
			if s := seg[k].Stack; s != trace.NoStack {
				seg[k].Stack = stackMap[s]
			}
		}
		n -= len(seg)
	}
}

// fixRecStacks is fixStacks for a chunk's records.
func fixRecStacks(recs []srec, stackMap []trace.StackID) {
	for k := range recs {
		if s := recs[k].Stack; s != trace.NoStack {
			recs[k].Stack = stackMap[s]
		}
	}
}

// intern is builder.internString for the committer.
func (r *region) intern(s string) int32 {
	if id, ok := r.b.strIdx[s]; ok {
		return id
	}
	if id, ok := r.strNew[s]; ok {
		return id
	}
	id := int32(len(r.b.strs))
	r.b.strs = append(r.b.strs, s)
	r.strNew[s] = id
	return id
}

// frame is toFrame's interning for the committer.
func (r *region) frame(f trace.Frame) int32 {
	b := r.b
	if id, ok := b.frameIdx[f]; ok {
		return id
	}
	if id, ok := r.frameNew[f]; ok {
		return id
	}
	id := int32(len(b.frames))
	b.frames = append(b.frames, f)
	r.frameNew[f] = id
	return id
}
