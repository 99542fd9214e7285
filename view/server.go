package view

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/trace"
)

//go:embed assets
var assets embed.FS

// Info describes the view for the page: the traces, their extents and
// marks, and the axis.
type Info struct {
	Axis   string      `json:"axis"` // "time_us" or "event"
	Traces []TraceInfo `json:"traces"`
}

// TraceInfo is one trace of the view.
type TraceInfo struct {
	ID     int    `json:"id"`
	Name   string `json:"name"`
	Label  string `json:"label"`
	Device int32  `json:"device"`
	Events int64  `json:"events"`
	// XMax is the last event's x; the range starts at 0.
	XMax               int64  `json:"x_max"`
	PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64  `json:"peak_reserved_bytes"`
	Marks              []Mark `json:"marks"`
}

// Info returns the description of v.
func (v *View) Info() *Info {
	info := &Info{Axis: "event", Traces: []TraceInfo{}}
	if v.TimeAxis {
		info.Axis = "time_us"
	}
	for i, t := range v.Traces {
		ti := TraceInfo{ID: i, Name: t.Name, Label: t.Label, Device: t.Device, Events: t.Events(),
			PeakAllocatedBytes: int64(t.sum.Peaks.Allocated.Bytes), PeakReservedBytes: int64(t.sum.Peaks.Reserved.Bytes),
			Marks: t.marks}
		if ti.Marks == nil {
			ti.Marks = []Mark{}
		}
		if t.Events() > 0 {
			ti.XMax = t.x(t.Events() - 1)
		}
		info.Traces = append(info.Traces, ti)
	}
	return info
}

// StackView is a whole stack, innermost frame first.
type StackView struct {
	Trace  int      `json:"trace"`
	Stack  int      `json:"stack"`
	Site   string   `json:"site"`
	Frames []string `json:"frames"`
}

// Handler serves the page and its JSON endpoints:
//
//	GET /                        the page
//	GET /api/info                Info
//	GET /api/timeline?trace=&x0=&x1=&cols=   Columns
//	GET /api/moment?trace=&event=            Moment
//	GET /api/stack?trace=&stack=             StackView
//
// A bad parameter is a 400 with a one-line message.
func (v *View) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		page, err := v.page(nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
	mux.HandleFunc("GET /api/info", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, v.Info()) })
	mux.HandleFunc("GET /api/timeline", func(w http.ResponseWriter, r *http.Request) {
		q := query{r: r}
		t, id := v.trace(&q)
		x0, x1 := q.int("x0", 0), q.int("x1", 0)
		cols := q.int("cols", 1000)
		if q.err == nil && (cols < 1 || cols > maxCols) {
			q.err = fmt.Errorf("cols=%d: want 1 to %d", cols, maxCols)
		}
		if q.fail(w) {
			return
		}
		c := t.Columns(x0, x1, int(cols))
		c.Trace = id
		writeJSON(w, c)
	})
	mux.HandleFunc("GET /api/moment", func(w http.ResponseWriter, r *http.Request) {
		q := query{r: r}
		t, id := v.trace(&q)
		ev := q.int("event", 0)
		if q.err == nil && (ev < 0 || ev >= t.Events()) {
			q.err = fmt.Errorf("event=%d: the trace has events 0 to %d", ev, t.Events()-1)
		}
		if q.fail(w) {
			return
		}
		writeJSON(w, t.Moment(id, ev))
	})
	mux.HandleFunc("GET /api/stack", func(w http.ResponseWriter, r *http.Request) {
		q := query{r: r}
		t, id := v.trace(&q)
		sid := q.int("stack", 0)
		if q.fail(w) {
			return
		}
		st := t.stack(trace.StackID(sid))
		writeJSON(w, StackView{Trace: id, Stack: int(sid), Site: analysis.SiteLabel(trace.StackID(sid), st), Frames: stackLines(st)})
	})
	return mux
}

// query reads integer parameters, keeping the first error.
type query struct {
	r   *http.Request
	err error
}

func (q *query) int(name string, def int64) int64 {
	s := q.r.URL.Query().Get(name)
	if s == "" || q.err != nil {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		q.err = fmt.Errorf("%s=%q: want an integer", name, s)
	}
	return n
}

func (q *query) fail(w http.ResponseWriter) bool {
	if q.err == nil {
		return false
	}
	http.Error(w, q.err.Error(), http.StatusBadRequest)
	return true
}

func (v *View) trace(q *query) (*Trace, int) {
	id := q.int("trace", 0)
	if q.err == nil && (id < 0 || id >= int64(len(v.Traces))) {
		q.err = fmt.Errorf("trace=%d: the view has traces 0 to %d", id, len(v.Traces)-1)
	}
	if q.err != nil {
		return nil, 0
	}
	return v.Traces[id], int(id)
}

func writeJSON(w http.ResponseWriter, x any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(x); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
