package view

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tracer-dev/tracer/analysis"
	"github.com/tracer-dev/tracer/trace"
)

// page returns the page with its style and script inline: with data nil it
// asks the server for everything (/api/...); with data it is a report that
// reads the embedded JSON and needs nothing else.
func (v *View) page(data []byte) ([]byte, error) {
	read := func(name string) (string, error) {
		b, err := assets.ReadFile("assets/" + name)
		return string(b), err
	}
	html, err := read("index.html")
	if err != nil {
		return nil, err
	}
	css, err := read("style.css")
	if err != nil {
		return nil, err
	}
	js, err := read("app.js")
	if err != nil {
		return nil, err
	}
	embed := ""
	if data != nil {
		// encoding/json escapes <, > and &, so the JSON cannot end the
		// script element early.
		embed = `<script type="application/json" id="tracer-data">` + string(data) + `</script>`
	}
	html = strings.Replace(html, "/*CSS*/", css, 1)
	html = strings.Replace(html, "<!--DATA-->", embed, 1)
	html = strings.Replace(html, "/*JS*/", js, 1)
	return []byte(html), nil
}

// The report's precomputed data: each trace's timeline at reportCols
// columns (the page zooms within it), every event of a window around each
// of its first reportDetails marks (so that zooming in there reaches single
// events), and its state at its marks and at reportMoments evenly spaced
// moments (a click shows the nearest one).
const (
	reportCols      = 4096
	reportDetails   = 8
	reportWindow    = 600 // events each side of a mark
	reportMoments   = 40
	reportMarks     = 24
	reportBlocks    = 600 // blocks drawn per saved moment
	reportStackKeep = 48  // frames kept per stack
)

type reportData struct {
	Info      *Info                  `json:"info"`
	Timelines []*Columns             `json:"timelines"`
	Details   [][]*Columns           `json:"details"`
	Moments   [][]*Moment            `json:"moments"`
	Stacks    []map[string]StackView `json:"stacks"`
}

// WriteReport writes the view as one self-contained HTML file: the page,
// its script and the data, with no reference to anything outside it.
func (v *View) WriteReport(ctx context.Context, w io.Writer) error {
	d := reportData{Info: v.Info()}
	for id, t := range v.Traces {
		if err := ctx.Err(); err != nil {
			return err
		}
		xmax := int64(0)
		if t.Events() > 0 {
			xmax = t.x(t.Events() - 1)
		}
		c := t.Columns(0, xmax, reportCols)
		c.Trace = id
		d.Timelines = append(d.Timelines, c)
		details := []*Columns{}
		points := t.pointMarks()
		for _, m := range points[:min(len(points), reportDetails)] {
			lo, hi := max(m.Event-reportWindow, 0), min(m.Event+reportWindow, t.Events()-1)
			if c.Exact || lo > hi {
				break // the whole timeline is already event by event
			}
			dc := t.Columns(t.x(lo), t.x(hi), int(hi-lo+1))
			dc.Trace = id
			details = append(details, dc)
		}
		d.Details = append(d.Details, details)
		var at []int64
		for _, m := range points[:min(len(points), reportMarks)] {
			at = append(at, m.Event)
		}
		for k := range reportMoments {
			at = append(at, t.Events()*int64(k)/reportMoments)
		}
		if t.Events() > 0 {
			at = append(at, t.Events()-1)
		}
		moments := []*Moment{}
		stacks := map[string]StackView{}
		seen := map[int64]bool{}
		for _, e := range at {
			if seen[e] || e < 0 || e >= t.Events() {
				continue
			}
			seen[e] = true
			m := t.moment(id, e, reportBlocks)
			moments = append(moments, m)
			for _, g := range m.Segments {
				for _, b := range g.Blocks {
					t.keepStack(stacks, id, b.Stack)
				}
			}
			m.Stacks = map[string][]string{} // the report's table has them
			for _, b := range m.Largest {
				t.keepStack(stacks, id, b.Stack)
			}
		}
		d.Moments = append(d.Moments, moments)
		d.Stacks = append(d.Stacks, stacks)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	page, err := v.page(data)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, bytes.NewReader(page))
	return err
}

func (t *Trace) keepStack(stacks map[string]StackView, id int, sid trace.StackID) {
	key := fmt.Sprint(sid)
	if _, ok := stacks[key]; ok || sid < 0 {
		return
	}
	st := t.stack(sid)
	lines := stackLines(st[:min(len(st), reportStackKeep)])
	if len(st) > reportStackKeep {
		lines = append(lines, fmt.Sprintf("… %d more frames", len(st)-reportStackKeep))
	}
	stacks[key] = StackView{Trace: id, Stack: int(sid), Site: analysis.SiteLabel(sid, st), Frames: lines}
}
