package analysis

// Series names one quantity the Timeline follows.
type Series int

// The series of a Timeline. Byte series are the allocator statistics of spec
// §11 after each event; the fragmentation series are derived from them (see
// the package doc for their definitions).
const (
	Allocated     Series = iota // allocated bytes: blocks from alloc to free_requested
	Reserved                    // reserved bytes: segment and mapped bytes
	Active                      // active bytes: blocks from alloc to free_completed
	Requested                   // requested bytes: caller sizes, alloc to free_completed
	External                    // reserved − allocated
	Internal                    // active − requested (rounding waste)
	InactiveSplit               // free bytes inside segments that hold active blocks
	ExternalRatio               // (reserved − allocated) / reserved; 0 when nothing is reserved
	NumSeries
)

var seriesNames = [NumSeries]string{"allocated", "reserved", "active", "requested",
	"external", "internal", "inactive_split", "external_ratio"}

// String returns the series' snake_case name.
func (s Series) String() string {
	if s >= 0 && s < NumSeries {
		return seriesNames[s]
	}
	return "series?"
}

// DefaultBuckets is the Timeline bound when Options.TimelineBuckets is 0.
const DefaultBuckets = 4096

// Extreme is where one series reached its minimum or maximum in a bucket.
type Extreme struct {
	Value  float64 `json:"value"`
	Event  int64   `json:"event"` // event index (0-based count of events seen)
	Seq    int64   `json:"seq"`   // the event's trace.Event.Seq
	TimeUs int64   `json:"time_us"`
}

// Span is one series within one bucket.
type Span struct {
	Min  Extreme `json:"min"`
	Max  Extreme `json:"max"`
	Last float64 `json:"last"`
}

// Bucket covers the events [FirstEvent, LastEvent] and keeps, for every
// series, its minimum, maximum and last value over them: a plot drawn from
// min and max never loses a peak, however many events a bucket holds.
type Bucket struct {
	FirstEvent, LastEvent   int64
	FirstTimeUs, LastTimeUs int64
	Series                  [NumSeries]Span
}

// Timeline is a bounded reduction of the per-event series: at most a fixed
// number of buckets of equal event width. When it is full, neighbouring
// buckets merge and the width doubles, so memory never depends on the trace
// length and the per-event cost is a few compares.
type Timeline struct {
	Buckets []Bucket `json:"buckets"`
	Width   int64    `json:"width_events"` // events per bucket
	// HasTime reports whether events carried timestamps; X is then seconds
	// since T0Us, else the event index.
	HasTime bool  `json:"has_time"`
	T0Us    int64 `json:"t0_us"`
	// TimeUnit is the unit of X when HasTime: "s" (or ""), "ms" or "µs".
	// Plots choose it by the trace's length, so that a 30 ms trace reads
	// 0 to 30 ms rather than 0.00 to 0.03 s.
	TimeUnit string `json:"-"`
	// Phases are the runs of events in each phase (Summary.Phases), at most
	// a few thousand: past that, neighbours merge. Absent without phases.
	Phases []PhaseSpan `json:"phases,omitempty"`
}

// numInt is the number of integer (byte) series; ExternalRatio is the one
// fraction and is computed from External and Reserved.
const numInt = int(ExternalRatio)

// timelineBuilder accumulates a Timeline one event at a time. The open
// bucket is kept as integer arrays, compared without conversions: add runs
// once per event.
type timelineBuilder struct {
	max          int
	width        int64
	full         []Bucket
	open         bool
	first        int64 // open bucket's first event and time
	firstT       int64
	lastN, lastT int64
	lo, hi       [numInt]int64
	loN, hiN     [numInt]int64
	loS, hiS     [numInt]int64
	loT, hiT     [numInt]int64
	last         [numInt]int64
	// External ratio extremes as fractions num/den (den > 0, or 0/1).
	rLo, rHi   [2]int64
	rLoN, rHiN int64
	rLoS, rHiS int64
	rLoT, rHiT int64
}

func newTimelineBuilder(max int) timelineBuilder {
	if max <= 0 {
		max = DefaultBuckets
	}
	if max < 2 {
		max = 2
	}
	max &^= 1 // merging pairs needs an even count
	return timelineBuilder{max: max, width: 1, full: make([]Bucket, 0, max)}
}

// add records the byte values v after event n (0-based), of sequence
// number seq, at time t.
func (b *timelineBuilder) add(n, seq, t int64, v *[numInt]int64) {
	if b.open && n-b.first >= b.width {
		b.push()
	}
	num, den := v[External], v[Reserved]
	if den <= 0 {
		num, den = 0, 1
	}
	if !b.open {
		b.open = true
		b.first, b.firstT = n, t
		b.lo, b.hi, b.last = *v, *v, *v
		for i := range b.loN {
			b.loN[i], b.hiN[i], b.loT[i], b.hiT[i] = n, n, t, t
			b.loS[i], b.hiS[i] = seq, seq
		}
		b.rLo, b.rHi = [2]int64{num, den}, [2]int64{num, den}
		b.rLoN, b.rHiN, b.rLoT, b.rHiT = n, n, t, t
		b.rLoS, b.rHiS = seq, seq
		b.lastN, b.lastT = n, t
		return
	}
	for i := range numInt {
		x := v[i]
		if x < b.lo[i] {
			b.lo[i], b.loN[i], b.loS[i], b.loT[i] = x, n, seq, t
		} else if x > b.hi[i] {
			b.hi[i], b.hiN[i], b.hiS[i], b.hiT[i] = x, n, seq, t
		}
	}
	b.last = *v
	// num/den < lo.num/lo.den without dividing (float products: no overflow).
	fn, fd := float64(num), float64(den)
	if fn*float64(b.rLo[1]) < float64(b.rLo[0])*fd {
		b.rLo, b.rLoN, b.rLoS, b.rLoT = [2]int64{num, den}, n, seq, t
	} else if fn*float64(b.rHi[1]) > float64(b.rHi[0])*fd {
		b.rHi, b.rHiN, b.rHiS, b.rHiT = [2]int64{num, den}, n, seq, t
	}
	b.lastN, b.lastT = n, t
}

// bucket converts the open bucket to a Bucket.
func (b *timelineBuilder) bucket() Bucket {
	k := Bucket{FirstEvent: b.first, FirstTimeUs: b.firstT, LastEvent: b.lastN, LastTimeUs: b.lastT}
	for i := range numInt {
		k.Series[i] = Span{
			Min:  Extreme{float64(b.lo[i]), b.loN[i], b.loS[i], b.loT[i]},
			Max:  Extreme{float64(b.hi[i]), b.hiN[i], b.hiS[i], b.hiT[i]},
			Last: float64(b.last[i]),
		}
	}
	last := 0.0
	if b.last[Reserved] > 0 {
		last = float64(b.last[External]) / float64(b.last[Reserved])
	}
	k.Series[ExternalRatio] = Span{
		Min:  Extreme{float64(b.rLo[0]) / float64(b.rLo[1]), b.rLoN, b.rLoS, b.rLoT},
		Max:  Extreme{float64(b.rHi[0]) / float64(b.rHi[1]), b.rHiN, b.rHiS, b.rHiT},
		Last: last,
	}
	return k
}

func (b *timelineBuilder) push() {
	b.full = append(b.full, b.bucket())
	b.open = false
	if len(b.full) < b.max {
		return
	}
	// Merge neighbours: bucket i absorbs buckets 2i and 2i+1.
	for i := 0; i < len(b.full)/2; i++ {
		b.full[i] = mergeBuckets(b.full[2*i], b.full[2*i+1])
	}
	b.full = b.full[:len(b.full)/2]
	b.width *= 2
}

func mergeBuckets(a, c Bucket) Bucket {
	m := a
	m.LastEvent, m.LastTimeUs = c.LastEvent, c.LastTimeUs
	for i := range m.Series {
		s, o := &m.Series[i], &c.Series[i]
		if o.Min.Value < s.Min.Value {
			s.Min = o.Min
		}
		if o.Max.Value > s.Max.Value {
			s.Max = o.Max
		}
		s.Last = o.Last
	}
	return m
}

// finish returns the Timeline; the builder must not be used afterwards.
func (b *timelineBuilder) finish(hasTime bool, t0 int64) Timeline {
	out := b.full
	if b.open {
		out = append(out, b.bucket())
	}
	return Timeline{Buckets: out, Width: b.width, HasTime: hasTime, T0Us: t0}
}

// Max returns the maximum of series s and the first event that reached it.
func (tl *Timeline) Max(s Series) Extreme {
	var m Extreme
	for i := range tl.Buckets {
		if x := tl.Buckets[i].Series[s].Max; i == 0 || x.Value > m.Value {
			m = x
		}
	}
	return m
}

// X converts an event index and time to the Timeline's x coordinate.
func (tl *Timeline) X(event, timeUs int64) float64 {
	if tl.HasTime {
		if timeUs == 0 {
			return 0 // an untimed event (a reconstructed one) sits at the start
		}
		d := float64(timeUs - tl.T0Us)
		switch tl.TimeUnit {
		case "ms":
			return d / 1e3
		case "µs":
			return d
		}
		return d / 1e6
	}
	return float64(event)
}

// XLabel names the x axis of X.
func (tl *Timeline) XLabel() string {
	if tl.HasTime {
		unit := tl.TimeUnit
		if unit == "" {
			unit = "s"
		}
		return "time since first event (" + unit + ")"
	}
	return "event index"
}

// SpanUs is the time from the first event to the last, in µs (0 when the
// events carry no time).
func (tl *Timeline) SpanUs() int64 {
	if !tl.HasTime || len(tl.Buckets) == 0 {
		return 0
	}
	return tl.Buckets[len(tl.Buckets)-1].LastTimeUs - tl.T0Us
}

// Series returns series s as an envelope: two points per bucket, its
// minimum and maximum in the order they happened. It implements gonum's
// plotter.XYer (Len and XY), so plots draw it directly, and Scale divides
// every y (1<<20 gives MiB).
func (tl *Timeline) Series(s Series, scale float64) Envelope {
	if scale == 0 {
		scale = 1
	}
	return Envelope{tl: tl, s: s, scale: scale}
}

// Envelope is a min/max view of one Timeline series; see Timeline.Series.
type Envelope struct {
	tl    *Timeline
	s     Series
	scale float64
}

// Len returns the number of points: two per bucket.
func (e Envelope) Len() int { return 2 * len(e.tl.Buckets) }

// XY returns point i: the earlier of the bucket's min and max, then the later.
func (e Envelope) XY(i int) (x, y float64) {
	sp := &e.tl.Buckets[i/2].Series[e.s]
	first, second := sp.Min, sp.Max
	if second.Event < first.Event {
		first, second = second, first
	}
	p := first
	if i%2 == 1 {
		p = second
	}
	return e.tl.X(p.Event, p.TimeUs), p.Value / e.scale
}
