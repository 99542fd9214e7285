package view

// Columns is a trace's byte series reduced over the pixel columns of a
// range: per column, each series' minimum and maximum and the event of the
// maximum, so the page draws an envelope that never loses a peak. When the
// range holds few events (Exact), each column is one event.
type Columns struct {
	Trace int   `json:"trace"`
	X0    int64 `json:"x0"` // the range asked for, in the axis unit
	X1    int64 `json:"x1"`
	Exact bool  `json:"exact"`
	// Per column: its first and last event and their x.
	FirstEvent []int64 `json:"first_event"`
	LastEvent  []int64 `json:"last_event"`
	XStart     []int64 `json:"x_start"`
	XEnd       []int64 `json:"x_end"`
	// Per series (Series order), per column.
	Series   []string  `json:"series"`
	Min      [][]int64 `json:"min_bytes"`
	Max      [][]int64 `json:"max_bytes"`
	MaxEvent [][]int64 `json:"max_event"`
}

// maxCols bounds the columns a query may ask for.
const maxCols = 8192

// exactPerCol: a range with at most this many events per column is sent
// event by event, each event's values computed exactly by resuming the
// analysis from the nearest state (bounded work: Trace.every + the range).
const exactPerCol = 2

// Columns reduces the series over [x0, x1] (the axis unit: µs since t0, or
// event index) into at most cols columns. The events just outside the
// range are included, so the lines reach both edges.
func (t *Trace) Columns(x0, x1 int64, cols int) *Columns {
	cols = min(max(cols, 1), maxCols)
	c := &Columns{X0: x0, X1: x1, Series: seriesNames[:], FirstEvent: []int64{}, LastEvent: []int64{},
		XStart: []int64{}, XEnd: []int64{}}
	for range numSeries {
		c.Min, c.Max, c.MaxEvent = append(c.Min, []int64{}), append(c.Max, []int64{}), append(c.MaxEvent, []int64{})
	}
	n := t.Events()
	if n == 0 || x1 < x0 {
		return c
	}
	e0 := max(t.firstAt(x0)-1, 0)
	e1 := min(t.firstAt(x1+1)+1, n) // exclusive
	if e1-e0 <= int64(cols)*exactPerCol {
		c.Exact = true
		s := t.resume(e0)
		for i := e0; i < e1; i++ {
			ev := t.evs[i].full(t.Device, i)
			s.Event(&ev)
			v := levelsOf(s.Levels())
			x := t.x(i)
			c.FirstEvent, c.LastEvent = append(c.FirstEvent, i), append(c.LastEvent, i)
			c.XStart, c.XEnd = append(c.XStart, x), append(c.XEnd, x)
			for k := range numSeries {
				c.Min[k], c.Max[k] = append(c.Min[k], v[k]), append(c.Max[k], v[k])
				c.MaxEvent[k] = append(c.MaxEvent[k], i)
			}
		}
		return c
	}
	// Column boundaries, snapped down to whole leaves of the pyramid: the
	// columns stay disjoint and cover the range, so every event's values
	// count in exactly one column.
	leaves := (n + leafEvents - 1) / leafEvents
	prev := e0 / leafEvents
	end := min((e1+leafEvents-1)/leafEvents, leaves)
	for col := 1; col <= cols; col++ {
		next := end
		if col < cols {
			bx := x0 + (x1-x0)*int64(col)/int64(cols)
			next = min(max(t.firstAt(bx)/leafEvents, prev), end)
		}
		if next == prev {
			continue
		}
		sp := t.pyr.reduce(prev, next)
		first, last := prev*leafEvents, min(next*leafEvents, n)-1
		c.FirstEvent, c.LastEvent = append(c.FirstEvent, first), append(c.LastEvent, last)
		c.XStart, c.XEnd = append(c.XStart, t.x(first)), append(c.XEnd, t.x(last))
		for k := range numSeries {
			c.Min[k], c.Max[k] = append(c.Min[k], sp.lo[k]), append(c.Max[k], sp.hi[k])
			c.MaxEvent[k] = append(c.MaxEvent[k], sp.hiAt[k])
		}
		prev = next
	}
	return c
}
