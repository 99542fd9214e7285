package torchsnap

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Settings is the recorded allocator_settings: the raw config string, the
// whole dict as JSON (for trace metadata, so nothing is lost), and a parsed
// view of the fields that change allocator behaviour.
type Settings struct {
	AllocConf string // PYTORCH_CUDA_ALLOC_CONF as recorded ("" when none)
	JSON      string // allocator_settings re-encoded as a JSON object, keys sorted

	MaxSplitSize               int64 // bytes; -1 = unlimited
	GarbageCollectionThreshold float64
	ExpandableSegments         bool
	// RoundupPower2Divisions[i] is the divisions for sizes in [2^i, 2^(i+1)) MiB
	// (index 0 also covers everything below 2 MiB); 0 = off.
	RoundupPower2Divisions [16]int64
}

// Annotation is one external_annotations entry: a record_function user scope
// starting or ending.
type Annotation struct {
	Name   string
	Stage  string // "START" or "END"
	Device int32
	TimeUs int64
	Extra  map[string]string // any other keys, values as JSON
}

func (b *builder) settings(v value) (Settings, error) {
	var s Settings
	if v.k == vNone {
		return s, nil
	}
	if v.k != vDict {
		return s, fmt.Errorf(notSnapshot+"allocator_settings is a %v, want a dict", v.k)
	}
	s.JSON = b.jsonString(v)
	d := &b.dicts[v.i]
	for j, k := range d.keys {
		if k.k != vStr {
			continue
		}
		val := d.vals[j]
		var err error
		switch name := b.strs[k.i]; name {
		case "PYTORCH_CUDA_ALLOC_CONF":
			if val.k != vNone {
				s.AllocConf, err = b.str(val)
			}
		case "max_split_size":
			s.MaxSplitSize, err = asInt(val)
		case "garbage_collection_threshold":
			s.GarbageCollectionThreshold, err = asFloat(val)
		case "expandable_segments":
			s.ExpandableSegments, err = asBool(val)
		case "roundup_power2_divisions":
			err = b.roundup(val, &s.RoundupPower2Divisions)
		}
		if err != nil {
			return s, fmt.Errorf("allocator_settings: %s %w", b.strs[k.i], err)
		}
	}
	return s, nil
}

func (b *builder) roundup(v value, out *[16]int64) error {
	switch v.k {
	case vDict:
		d := &b.dicts[v.i]
		for j, k := range d.keys {
			key, err := b.str(k)
			if err != nil {
				return fmt.Errorf("key %w", err)
			}
			mib, err := strconv.ParseUint(key, 10, 64)
			if err != nil || mib == 0 || mib&(mib-1) != 0 || mib > 1<<15 {
				return fmt.Errorf("key %q is not a power of two MiB up to 32768", key)
			}
			n, err := asInt(d.vals[j])
			if err != nil {
				return fmt.Errorf("[%q] %w", key, err)
			}
			out[bits.TrailingZeros64(mib)] = n
		}
	case vList, vTuple: // some builds export the plain vector
		for i, e := range b.items(v) {
			if i >= len(out) {
				break
			}
			n, err := asInt(e)
			if err != nil {
				return fmt.Errorf("[%d] %w", i, err)
			}
			out[i] = n
		}
	case vNone:
	default:
		return fmt.Errorf("is a %v, want a dict", v.k)
	}
	return nil
}

func (b *builder) annotations(v value) ([]Annotation, error) {
	if v.k == vNone {
		return nil, nil
	}
	if v.k != vList && v.k != vTuple {
		return nil, fmt.Errorf(notSnapshot+"external_annotations is a %v, want a list", v.k)
	}
	var out []Annotation
	for i, e := range b.items(v) {
		if e.k != vDict {
			return nil, fmt.Errorf("external_annotations[%d] is a %v, want a dict", i, e.k)
		}
		a := Annotation{}
		d := &b.dicts[e.i]
		for j, k := range d.keys {
			name, err := b.str(k)
			if err != nil {
				return nil, fmt.Errorf("external_annotations[%d]: key %w", i, err)
			}
			val := d.vals[j]
			switch name {
			case "name":
				a.Name, err = b.str(val)
			case "stage":
				a.Stage, err = b.str(val)
			case "device":
				var n int64
				n, err = asInt(val)
				a.Device = int32(n)
			case "time_us":
				a.TimeUs, err = asInt(val)
			default:
				if a.Extra == nil {
					a.Extra = map[string]string{}
				}
				a.Extra[name] = b.jsonString(val)
			}
			if err != nil {
				return nil, fmt.Errorf("external_annotations[%d]: %s %w", i, name, err)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// jsonString renders a generic value as JSON, dict keys sorted, so the same
// settings always give the same metadata string.
func (b *builder) jsonString(v value) string {
	var sb strings.Builder
	w := jsonWriter{b: b, sb: &sb, budget: maxJSONNodes}
	w.write(v, 0)
	return sb.String()
}

// maxJSONNodes bounds the work of rendering one value: memo references can
// make a small pickle describe a huge (or cyclic) tree.
const maxJSONNodes = 1 << 16

type jsonWriter struct {
	b      *builder
	sb     *strings.Builder
	budget int
}

func (w *jsonWriter) write(v value, depth int) {
	b, sb := w.b, w.sb
	w.budget--
	if depth > 64 || w.budget < 0 {
		sb.WriteString("null")
		return
	}
	switch v.k {
	case vNone, vMark, vBytes, vBig:
		sb.WriteString("null")
	case vBool:
		sb.WriteString(strconv.FormatBool(v.i != 0))
	case vInt:
		sb.WriteString(strconv.FormatInt(v.i, 10))
	case vUint:
		sb.WriteString(strconv.FormatUint(uint64(v.i), 10))
	case vFloat:
		f := math.Float64frombits(uint64(v.i))
		if math.IsInf(f, 0) || math.IsNaN(f) {
			sb.WriteString("null")
		} else {
			sb.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		}
	case vStr:
		writeJSONString(sb, b.strs[v.i])
	case vList, vTuple:
		sb.WriteByte('[')
		for i, e := range b.items(v) {
			if i > 0 {
				sb.WriteByte(',')
			}
			w.write(e, depth+1)
		}
		sb.WriteByte(']')
	case vDict:
		d := &b.dicts[v.i]
		idx := make([]int, len(d.keys))
		for i := range idx {
			idx[i] = i
		}
		key := func(i int) string {
			if d.keys[i].k == vStr {
				return b.strs[d.keys[i].i]
			}
			return d.keys[i].k.String()
		}
		sort.SliceStable(idx, func(x, y int) bool { return key(idx[x]) < key(idx[y]) })
		sb.WriteByte('{')
		for n, i := range idx {
			if n > 0 {
				sb.WriteByte(',')
			}
			writeJSONString(sb, key(i))
			sb.WriteByte(':')
			w.write(d.vals[i], depth+1)
		}
		sb.WriteByte('}')
	default: // converted schema objects never appear inside settings
		sb.WriteString("null")
	}
}

func writeJSONString(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(sb, `\u%04x`, r)
		default:
			sb.WriteRune(r) // invalid bytes become U+FFFD
		}
		i += size
	}
	sb.WriteByte('"')
}
