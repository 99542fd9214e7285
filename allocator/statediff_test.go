package allocator

import (
	"fmt"
	"reflect"
	"strings"
)

// topLevelDiff names the fields of a that differ from a new allocator's of
// family fam on a device of total bytes.
func topLevelDiff(a *Allocator, fam int, total int64) []string {
	fresh, err := New(famConf(nil, fam), NewSimDevice(total))
	if err != nil {
		panic(err)
	}
	var out []string
	x, y := reflect.ValueOf(a).Elem(), reflect.ValueOf(fresh).Elem()
	for i := range x.NumField() {
		d := &differ{seen: map[[2]uintptr]bool{}}
		d.cmp(x.Field(i), y.Field(i))
		if len(d.diffs) > 0 {
			out = append(out, x.Type().Field(i).Name)
		}
	}
	return out
}

// stateDiff compares two allocators field by field, following pointers
// (PoolIDs, blocks and pools are compared by content, not identity), and
// returns the differences. Slices compare by length and content, not
// capacity; maps by their entries; functions by whether they are nil. The
// fields of reuseOnly hold memory kept for reuse, not state, and are
// skipped.
func stateDiff(a, b *Allocator) []string {
	d := &differ{seen: map[[2]uintptr]bool{}, path: []pathPart{{name: "Allocator"}}}
	d.cmp(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
	return d.diffs
}

// spareDiff checks the memory a Reset kept (the fields of reuseOnly), which
// stateDiff skips: handed out again, it must be as new memory would be.
// Pages, the bins of streams, private pools and expandable segments must be
// empty.
func spareDiff(a *Allocator) []string {
	d := &differ{seen: map[[2]uintptr]bool{}}
	sp := a.pages.spare
	if sp == nil {
		d.add("pageSlab.spare: Reset made no spare memory")
		return d.diffs
	}
	if len(a.pages.free) != len(sp.slab) {
		d.add("pageSlab: %d pages to hand out, the kept slab has %d", len(a.pages.free), len(sp.slab))
	}
	for i := range a.pages.free {
		for j := range a.pages.free[i] {
			h := &a.pages.free[i][j]
			if h.id != 0 || h.size != 0 || h.addr != 0 || h.nrest != 0 || (h.rest != nil && len(restEntries(h.rest)) != 0) {
				d.add("pageSlab: page %d holds class %d: %+v", i, j, *h)
			}
		}
	}
	for i, b := range sp.bins {
		if !reflect.ValueOf(b).Elem().IsZero() {
			d.add("spare.bins[%d]: not empty", i)
		}
	}
	for i, e := range sp.exps {
		if *e != (expSegment{}) {
			d.add("spare.exps[%d]: not empty", i)
		}
	}
	for i, p := range sp.pools {
		want := blockPool{small: p.small, idx: p.idx}
		want.blocks.slab = p.blocks.slab
		d.at(pathPart{name: fmt.Sprintf("spare.pools[%d]", i)}, reflect.ValueOf(p).Elem(), reflect.ValueOf(&want).Elem())
	}
	// The leaves a kTree keeps (kTree.spare) are cleared when handed out.
	return d.diffs
}

// reuseOnly are the fields, by type and name, that hold memory a Reset
// keeps for later (nothing reads them but to hand it out again): a reset
// allocator has more there than a new one.
var reuseOnly = map[string]bool{
	"pageSlab.free":       true,
	"pageSlab.spare":      true,
	"pageSlab.more":       true,
	"pageSlab.blockPools": true,
	"pageSlab.privates":   true,
	"pageSlab.nodes":      true,
	"kTree.nodes":         true,
	"kTree.spare":         true,
	"Allocator.pendPos":   true,
}

// differ collects the differences of two values. The path to the value
// compared is a stack of parts, made into a string only for a difference:
// formatting it for every value would cost most of the comparison.
type differ struct {
	diffs []string
	seen  map[[2]uintptr]bool
	path  []pathPart
}

// pathPart is a field name or, when name is "", an index.
type pathPart struct {
	name  string
	index int
}

func (d *differ) add(format string, args ...any) {
	if len(d.diffs) >= 20 {
		return
	}
	var b strings.Builder
	for _, p := range d.path {
		if p.name != "" {
			b.WriteString(p.name)
		} else {
			fmt.Fprintf(&b, "[%d]", p.index)
		}
	}
	d.diffs = append(d.diffs, b.String()+": "+fmt.Sprintf(format, args...))
}

// at compares x and y under the path part p.
func (d *differ) at(p pathPart, x, y reflect.Value) {
	d.path = append(d.path, p)
	d.cmp(x, y)
	d.path = d.path[:len(d.path)-1]
}

func (d *differ) cmp(x, y reflect.Value) {
	switch x.Kind() {
	case reflect.Bool:
		if x.Bool() != y.Bool() {
			d.add("%v != %v", x.Bool(), y.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if x.Int() != y.Int() {
			d.add("%d != %d", x.Int(), y.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if x.Uint() != y.Uint() {
			d.add("%d != %d", x.Uint(), y.Uint())
		}
	case reflect.Float32, reflect.Float64:
		if x.Float() != y.Float() {
			d.add("%v != %v", x.Float(), y.Float())
		}
	case reflect.String:
		if x.String() != y.String() {
			d.add("%q != %q", x.String(), y.String())
		}
	case reflect.Func:
		if x.IsNil() != y.IsNil() {
			d.add("func nil %v != %v", x.IsNil(), y.IsNil())
		}
	case reflect.Pointer:
		if x.IsNil() || y.IsNil() {
			if x.IsNil() != y.IsNil() {
				d.add("nil %v != %v", x.IsNil(), y.IsNil())
			}
			return
		}
		k := [2]uintptr{x.Pointer(), y.Pointer()}
		if d.seen[k] {
			return
		}
		d.seen[k] = true
		d.cmp(x.Elem(), y.Elem())
	case reflect.Interface:
		if x.IsNil() || y.IsNil() {
			if x.IsNil() != y.IsNil() {
				d.add("nil %v != %v", x.IsNil(), y.IsNil())
			}
			return
		}
		if x.Elem().Type() != y.Elem().Type() {
			d.add("type %v != %v", x.Elem().Type(), y.Elem().Type())
			return
		}
		d.cmp(x.Elem(), y.Elem())
	case reflect.Array:
		for i := range x.Len() {
			d.at(pathPart{index: i}, x.Index(i), y.Index(i))
		}
	case reflect.Slice:
		if x.Len() != y.Len() {
			d.add("len %d != %d", x.Len(), y.Len())
			return
		}
		for i := range x.Len() {
			d.at(pathPart{index: i}, x.Index(i), y.Index(i))
		}
	case reflect.Map:
		if x.Len() != y.Len() {
			d.add("len %d != %d", x.Len(), y.Len())
			return
		}
		it := x.MapRange()
		for it.Next() {
			yv := y.MapIndex(it.Key())
			p := pathPart{name: fmt.Sprintf("[%v]", it.Key())}
			if !yv.IsValid() {
				d.path = append(d.path, p)
				d.add("missing")
				d.path = d.path[:len(d.path)-1]
				continue
			}
			d.at(p, it.Value(), yv)
		}
	case reflect.Struct:
		t := x.Type()
		if strings.HasPrefix(t.Name(), "Map[") && strings.HasSuffix(t.PkgPath(), "internal/addrmap") {
			d.cmpAddrMap(x, y)
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if reuseOnly[t.Name()+"."+f.Name] {
				continue
			}
			p := pathPart{name: "." + f.Name}
			if t == reflect.TypeFor[bin]() && f.Name == "rest" {
				// Made on first need and kept when the class empties
				// (and when a Reset empties it): nil is an empty rest.
				d.at(p, restOf(x.Field(i)), restOf(y.Field(i)))
				continue
			}
			if t == reflect.TypeFor[blockPool]() && f.Name == "unmapped" {
				// Made on first need and kept, emptied, by a Reset:
				// nil is an empty set.
				d.at(p, setOf(x.Field(i)), setOf(y.Field(i)))
				continue
			}
			d.at(p, x.Field(i), y.Field(i))
		}
	default:
		panic(fmt.Sprintf("stateDiff: kind %v not handled", x.Kind()))
	}
}

// restOf is a bin's rest as a slice in descending order, nil when it was
// never made.
func restOf(v reflect.Value) reflect.Value {
	if v.IsNil() {
		return reflect.ValueOf([]sEntry(nil))
	}
	return reflect.ValueOf(restEntries((*restBuf)(v.UnsafePointer())))
}

// setOf is a block pool's unmapped set, an empty one when it was never
// made.
func setOf(v reflect.Value) reflect.Value {
	if v.IsNil() {
		return reflect.ValueOf(new(freeSet))
	}
	return v
}

// cmpAddrMap compares two addrmap.Maps by their entries: their tables may
// differ in size (a Clear keeps the table), and the order of their slots
// with it.
func (d *differ) cmpAddrMap(x, y reflect.Value) {
	entries := func(m reflect.Value) map[uint64]reflect.Value {
		out := map[uint64]reflect.Value{}
		slots := m.FieldByName("slots")
		for i := range slots.Len() {
			s := slots.Index(i)
			if k := s.FieldByName("key").Uint(); k != 0 {
				out[k] = s.FieldByName("val")
			}
		}
		return out
	}
	for _, f := range []string{"n", "hasZ", "zero"} {
		d.at(pathPart{name: "." + f}, x.FieldByName(f), y.FieldByName(f))
	}
	ex, ey := entries(x), entries(y)
	if len(ex) != len(ey) {
		d.add("%d entries != %d", len(ex), len(ey))
		return
	}
	for k, v := range ex {
		w, ok := ey[k]
		p := pathPart{name: fmt.Sprintf("[%#x]", k)}
		if !ok {
			d.path = append(d.path, p)
			d.add("missing")
			d.path = d.path[:len(d.path)-1]
			continue
		}
		d.at(p, v, w)
	}
}
