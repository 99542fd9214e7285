package trace

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Schema metadata keys. Every value is a string; numbers are decimal.
const (
	MetaFormat          = "tracer.format"         // always FormatName
	MetaVersion         = "tracer.version"        // decimal Version
	MetaProducer        = "tracer.producer"       // e.g. "tracer 0.1.0"
	MetaSource          = "tracer.source"         // one of the Source* constants
	MetaSourceFile      = "tracer.source_file"    // base name of the imported file, if any
	MetaAllocConf       = "tracer.alloc_conf"     // PYTORCH_CUDA_ALLOC_CONF the run used ("" = defaults)
	MetaAllocSettings   = "tracer.alloc_settings" // JSON object: the parsed settings as the source reported them
	MetaDeviceName      = "tracer.device_name"    // e.g. "NVIDIA H100 80GB HBM3"
	MetaDeviceTotal     = "tracer.device_total_bytes"
	MetaMemoryFraction  = "tracer.memory_fraction" // set_per_process_memory_fraction argument; "" = none/unknown
	MetaMemoryLimit     = "tracer.memory_limit_bytes"
	MetaTruncated       = "tracer.history_truncated" // "true": events before the first one were lost
	MetaEmptyCache      = "tracer.empty_cache"       // "rows": the trace states its empty_cache calls (EmptyCacheRows)
	MetaExtraPrefix     = "tracer.x."                // free-form producer annotations
	FormatName          = "gpu-mem-trace"
	SourceSnapshot      = "pytorch-snapshot" // imported from torch.cuda.memory._dump_snapshot
	SourceRecord        = "record"           // recorded live by tracer record
	SourceReplay        = "replay"           // written by tracer replay
	SourcePythonProgram = "record-python"    // tracer record -- python ...
)

// ExtraRank is the Meta.Extra key (stored as tracer.x.rank) holding the
// distributed rank a trace was recorded on, in decimal: tracer import
// writes it from the snapshot's file name or --rank.
const ExtraRank = "rank"

// ExtraEmptyCacheAfterOOM, a Meta.Extra key (tracer.x.empty_cache_after_oom),
// says the program empties the cache when it catches an OOM, which a
// recording cannot show (tracer import --oom-empties-cache): a replay that
// infers the calls from the releases infers those too.
const ExtraEmptyCacheAfterOOM = "empty_cache_after_oom"

// writeVersion is the version writers stamp; tests change it to fake files
// from a future tracer.
var writeVersion = Current

// Meta describes a whole trace. It is stored in the Arrow schema metadata.
type Meta struct {
	Version        Version // filled by the Reader; the Writer always writes Current
	Producer       string
	Source         string
	SourceFile     string
	AllocConf      string
	AllocSettings  string  // JSON object, or ""
	DeviceName     string  // "" when unknown
	DeviceTotal    int64   // bytes; 0 when unknown
	MemoryFraction float64 // 0 when none or unknown
	MemoryLimit    int64   // bytes the allocator may reserve (floor(fraction × total)); 0 = none/unknown
	// Truncated means the history is incomplete at its start: PyTorch's ring
	// buffer wrapped (max_entries) or recording began after the first
	// allocation. Such traces open with FlagReconstructed events.
	Truncated bool
	// EmptyCacheRows says the trace states every torch.cuda.empty_cache()
	// call that released memory as a KindEmptyCache row, and its
	// segment_free/segment_unmap rows are outcomes only. Without it a replay
	// infers the calls from the releases (see doc.go). Written only when set.
	EmptyCacheRows bool
	// Annotations are the user scopes (record_function) the source
	// recorded, in time order; nil when none (see Annotation).
	Annotations []Annotation
	Extra       map[string]string // keys without the MetaExtraPrefix (ExtraRank, ...)
}

func (m *Meta) keyValues() (keys, values []string) {
	add := func(k, v string) {
		keys = append(keys, k)
		values = append(values, v)
	}
	add(MetaFormat, FormatName)
	add(MetaVersion, strconv.Itoa(int(writeVersion)))
	add(MetaProducer, m.Producer)
	add(MetaSource, m.Source)
	add(MetaSourceFile, m.SourceFile)
	add(MetaAllocConf, m.AllocConf)
	add(MetaAllocSettings, m.AllocSettings)
	add(MetaDeviceName, m.DeviceName)
	add(MetaDeviceTotal, strconv.FormatInt(m.DeviceTotal, 10))
	frac := ""
	if m.MemoryFraction != 0 {
		frac = strconv.FormatFloat(m.MemoryFraction, 'g', -1, 64)
	}
	add(MetaMemoryFraction, frac)
	add(MetaMemoryLimit, strconv.FormatInt(m.MemoryLimit, 10))
	add(MetaTruncated, strconv.FormatBool(m.Truncated))
	if m.EmptyCacheRows {
		add(MetaEmptyCache, "rows")
	}
	if len(m.Annotations) > 0 {
		add(MetaAnnotations, encodeAnnotations(m.Annotations))
	}
	extra := make([]string, 0, len(m.Extra))
	for k := range m.Extra {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	for _, k := range extra {
		add(MetaExtraPrefix+k, m.Extra[k])
	}
	return keys, values
}

// parseMeta reads the metadata written by keyValues. Unknown keys are ignored
// so that later versions may add some.
func parseMeta(keys, values []string) (Meta, error) {
	var m Meta
	get := map[string]string{}
	for i, k := range keys {
		get[k] = values[i]
		if strings.HasPrefix(k, MetaExtraPrefix) {
			if m.Extra == nil {
				m.Extra = map[string]string{}
			}
			m.Extra[strings.TrimPrefix(k, MetaExtraPrefix)] = values[i]
		}
	}
	if f := get[MetaFormat]; f != FormatName {
		if f == "" {
			return m, fmt.Errorf("not a tracer trace (no %q schema metadata)", MetaFormat)
		}
		return m, fmt.Errorf("not a tracer trace (format %q)", f)
	}
	v, err := strconv.ParseUint(get[MetaVersion], 10, 16)
	if err != nil || v == 0 {
		return m, fmt.Errorf("bad format version %q", get[MetaVersion])
	}
	m.Version = Version(v)
	m.Producer = get[MetaProducer]
	m.Source = get[MetaSource]
	m.SourceFile = get[MetaSourceFile]
	m.AllocConf = get[MetaAllocConf]
	m.AllocSettings = get[MetaAllocSettings]
	m.DeviceName = get[MetaDeviceName]
	m.DeviceTotal, _ = strconv.ParseInt(get[MetaDeviceTotal], 10, 64)
	m.MemoryFraction, _ = strconv.ParseFloat(get[MetaMemoryFraction], 64)
	m.MemoryLimit, _ = strconv.ParseInt(get[MetaMemoryLimit], 10, 64)
	m.Truncated = get[MetaTruncated] == "true"
	m.EmptyCacheRows = get[MetaEmptyCache] == "rows"
	if a, ok := get[MetaAnnotations]; ok {
		if m.Annotations, err = decodeAnnotations(a); err != nil {
			return m, err
		}
		SortAnnotations(m.Annotations)
	}
	return m, nil
}
