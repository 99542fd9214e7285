package view

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/trace"
)

// Moment is what the page shows for a clicked moment: the state after one
// event, from analysis.State, as segments with their blocks, live memory
// by allocation site (an icicle), and the largest blocks.
type Moment struct {
	Trace  int             `json:"trace"`
	Event  int64           `json:"event"`
	X      int64           `json:"x"`
	TimeUs int64           `json:"time_us"`
	Kind   string          `json:"kind"` // the event's
	Levels analysis.Levels `json:"levels"`

	Segments []SegmentView `json:"segments"`
	// BlocksOmitted counts the live blocks left out of Segments (the
	// smallest, past maxBlocks); their segments' totals still count them.
	BlocksOmitted int `json:"blocks_omitted"`
	// Outside counts live blocks outside any segment (a cut trace).
	Outside int `json:"blocks_outside_segments"`

	Sites   *SiteNode   `json:"sites"`
	Largest []BlockView `json:"largest"`
	// Stacks holds the whole stack of each block in Largest, by stack id,
	// innermost frame first.
	Stacks map[string][]string `json:"stacks"`
}

// SegmentView is one segment at the moment.
type SegmentView struct {
	Addr        string `json:"addr"`
	SizeBytes   int64  `json:"size_bytes"`
	Stream      uint64 `json:"stream"`
	Expandable  bool   `json:"expandable"`
	Allocated   int64  `json:"allocated_bytes"`
	PendingFree int64  `json:"pending_free_bytes"`
	// SplitFree is free beside live blocks; Free is the free bytes of a
	// segment with no live block (empty_cache would release it).
	SplitFree int64       `json:"split_free_bytes"`
	Free      int64       `json:"free_bytes"`
	Blocks    []BlockRect `json:"blocks"`
}

// BlockRect is a live block within its segment.
type BlockRect struct {
	Offset  int64         `json:"offset_bytes"`
	Size    int64         `json:"size_bytes"`
	Pending bool          `json:"pending"`
	Stack   trace.StackID `json:"stack"`
}

// BlockView is one of the largest live blocks.
type BlockView struct {
	Addr      string        `json:"addr"`
	Size      int64         `json:"size_bytes"`
	Requested int64         `json:"requested_bytes"`
	Pending   bool          `json:"pending"`
	Stack     trace.StackID `json:"stack"`
	Site      string        `json:"site"`
	AllocEv   int64         `json:"alloc_event"`
	AllocX    int64         `json:"alloc_x"`
	// Lifetime is from alloc to free_requested, in the axis unit (µs or
	// events); -1 when the block is still live at the end of the trace.
	Lifetime int64 `json:"lifetime_x"`
}

// SiteNode is one frame of the icicle: the live allocated bytes of the
// blocks whose stacks pass through it, outermost frame at the top.
type SiteNode struct {
	Name     string      `json:"name"`
	Bytes    int64       `json:"bytes"`
	Children []*SiteNode `json:"children"`
	kids     map[string]*SiteNode
}

const (
	maxBlocks  = 5000  // blocks drawn in a moment's segments (more do not show at a page's width)
	topBlocks  = 20    // rows of the largest blocks
	siteDepth  = 64    // frames of a stack in the icicle
	siteMinPct = 0.002 // icicle nodes below this share of the bytes are folded away
)

// Moment returns the moment after event i (clamped to the trace) of the
// view's trace id.
func (t *Trace) Moment(id int, i int64) *Moment { return t.moment(id, i, maxBlocks) }

// moment is Moment drawing at most maxBlocks blocks, the largest.
func (t *Trace) moment(id int, i int64, maxBlocks int) *Moment {
	n := t.Events()
	i = min(max(i, 0), max(n-1, 0))
	m := &Moment{Trace: id, Event: i, Segments: []SegmentView{}, Largest: []BlockView{}, Stacks: map[string][]string{}}
	if n == 0 {
		m.Sites = &SiteNode{Name: "all", Children: []*SiteNode{}}
		return m
	}
	st := t.stateAt(i)
	e := &t.evs[i]
	m.X, m.TimeUs, m.Kind, m.Levels = t.x(i), e.timeUs, e.kind.String(), st.Levels
	m.Outside = len(st.Outside)

	// The largest blocks are drawn, at most maxBlocks (those of the
	// smallest size drawn, by address); sorting the sizes alone finds the
	// cut, and the top rows sort only the blocks above theirs.
	var all []analysis.BlockState
	for _, g := range st.Segments {
		all = append(all, g.Live...)
	}
	all = append(all, st.Outside...)
	sizes := make([]analysis.Bytes, len(all))
	for k, b := range all {
		sizes[k] = b.Size
	}
	slices.Sort(sizes)
	minDrawn := analysis.Bytes(0)
	if len(sizes) > maxBlocks {
		minDrawn = sizes[len(sizes)-maxBlocks]
	}
	var top []analysis.BlockState
	if len(sizes) > 0 {
		cut := sizes[max(len(sizes)-topBlocks, 0)]
		for _, b := range all {
			if b.Size >= cut {
				top = append(top, b)
			}
		}
	}
	slices.SortFunc(top, func(a, b analysis.BlockState) int {
		return cmp.Or(cmp.Compare(b.Size, a.Size), cmp.Compare(a.Addr, b.Addr))
	})
	drawn := 0
	for _, g := range st.Segments {
		sv := SegmentView{Addr: fmtAddr(g.Addr), SizeBytes: int64(g.Size), Stream: g.Stream,
			Expandable: g.Expandable, Allocated: int64(g.Allocated), PendingFree: int64(g.PendingFree),
			SplitFree: int64(g.SplitFree), Free: int64(g.Free), Blocks: []BlockRect{}}
		for _, b := range g.Live {
			if b.Size < minDrawn || drawn >= maxBlocks {
				m.BlocksOmitted++
				continue
			}
			drawn++
			sv.Blocks = append(sv.Blocks, BlockRect{Offset: int64(b.Addr - g.Addr), Size: int64(b.Size), Pending: b.Pending, Stack: b.Stack})
		}
		m.Segments = append(m.Segments, sv)
	}
	for _, b := range top[:min(topBlocks, len(top))] {
		m.Largest = append(m.Largest, t.blockView(&b))
		if st := t.stack(b.Stack); st != nil {
			m.Stacks[fmt.Sprint(b.Stack)] = stackLines(st)
		}
	}
	m.Sites = t.sites(all)
	return m
}

func (t *Trace) blockView(b *analysis.BlockState) BlockView {
	v := BlockView{Addr: fmtAddr(b.Addr), Size: int64(b.Size), Requested: int64(b.Requested),
		Pending: b.Pending, Stack: b.Stack, AllocEv: b.AllocEvent, Lifetime: -1}
	v.Site = analysis.SiteLabel(b.Stack, t.stack(b.Stack))
	if b.AllocEvent >= 0 && b.AllocEvent < t.Events() {
		v.AllocX = t.x(b.AllocEvent)
		if f := t.freeAt[b.AllocEvent]; f >= 0 {
			v.Lifetime = t.x(int64(f)) - v.AllocX
		}
	}
	return v
}

func fmtAddr(a uint64) string { return fmt.Sprintf("%#x", a) }

// stackLines renders a stack one frame a line, innermost first.
func stackLines(st trace.Stack) []string {
	out := make([]string, len(st))
	for i, f := range st {
		out[i] = frameText(f)
	}
	return out
}

func frameText(f trace.Frame) string {
	line := "?"
	if f.Line >= 0 {
		line = fmt.Sprint(f.Line)
	}
	file := f.File
	if file == "" {
		file = "?"
	}
	return fmt.Sprintf("%s (%s:%s)", f.Name, path.Base(strings.ReplaceAll(file, "\\", "/")), line)
}

// sites builds the icicle of the allocated (not pending) blocks: bytes by
// stack, then down each stack from its outermost frame. Nodes under
// siteMinPct of the total are folded into their parent.
func (t *Trace) sites(blocks []analysis.BlockState) *SiteNode {
	byStack := map[trace.StackID]int64{}
	for _, b := range blocks {
		if !b.Pending {
			byStack[b.Stack] += int64(b.Size)
		}
	}
	root := &SiteNode{Name: "all", kids: map[string]*SiteNode{}}
	for id, bytes := range byStack {
		root.Bytes += bytes
		node := root
		var path []string
		switch st := t.stack(id); {
		case id == analysis.BeforeRecording:
			path = []string{"(live before the recording began)"}
		case len(st) == 0:
			path = []string{"(no stack)"}
		default:
			for j := len(st) - 1; j >= max(0, len(st)-siteDepth); j-- {
				path = append(path, frameText(st[j]))
			}
		}
		for _, name := range path {
			k := node.kids[name]
			if k == nil {
				k = &SiteNode{Name: name, kids: map[string]*SiteNode{}}
				node.kids[name] = k
			}
			k.Bytes += bytes
			node = k
		}
	}
	root.seal(int64(siteMinPct * float64(root.Bytes)))
	return root
}

// seal turns the children map into a slice, largest first, dropping those
// under minBytes.
func (n *SiteNode) seal(minBytes int64) {
	n.Children = []*SiteNode{}
	for _, k := range n.kids {
		if k.Bytes >= minBytes && k.Bytes > 0 {
			k.seal(minBytes)
			n.Children = append(n.Children, k)
		}
	}
	n.kids = nil
	slices.SortFunc(n.Children, func(a, b *SiteNode) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Name, b.Name))
	})
}
