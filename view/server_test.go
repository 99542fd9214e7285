package view

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// sampleView is the built-in sample.
func sampleView(t testing.TB) *View {
	t.Helper()
	v, err := Load(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func getJSON(t *testing.T, srv *httptest.Server, path string, out any) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q", path, ct)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if bytes.Contains(body, []byte(":null")) {
		t.Errorf("GET %s: a null in %s", path, body[:min(len(body), 300)])
	}
}

func TestHandler(t *testing.T) {
	v := sampleView(t)
	srv := httptest.NewServer(v.Handler())
	defer srv.Close()

	var info Info
	getJSON(t, srv, "/api/info", &info)
	if info.Axis != "event" || len(info.Traces) != 1 || info.Traces[0].Events != 1725 ||
		info.Traces[0].PeakAllocatedBytes != 576424960 || info.Traces[0].PeakReservedBytes != 606076928 {
		t.Fatalf("info %+v", info)
	}
	var kinds []string
	phases := 0
	for _, m := range info.Traces[0].Marks {
		if m.Kind == "phase" {
			phases++ // Adam's step and zero_grad scopes: TestPhaseMarks
			continue
		}
		kinds = append(kinds, m.Kind)
	}
	if strings.Join(kinds, " ") != "peak_allocated peak_reserved" || phases != 16 {
		t.Errorf("marks %v and %d phases", kinds, phases)
	}

	var c Columns
	getJSON(t, srv, "/api/timeline?trace=0&x0=0&x1=1724&cols=100", &c)
	if c.Exact || len(c.FirstEvent) == 0 || len(c.FirstEvent) > 100 || len(c.Max) != 4 || len(c.Max[0]) != len(c.FirstEvent) {
		t.Fatalf("timeline: exact %v, %d columns", c.Exact, len(c.FirstEvent))
	}
	var peak int64
	for _, x := range c.Max[1] {
		peak = max(peak, x)
	}
	if peak != 606076928 {
		t.Errorf("reserved max over the columns %d, want the peak 606076928", peak)
	}
	getJSON(t, srv, "/api/timeline?trace=0&x0=200&x1=220&cols=100", &c)
	if !c.Exact || c.FirstEvent[0] != 199 || c.LastEvent[len(c.LastEvent)-1] != 221 {
		t.Errorf("zoomed timeline: exact %v, events %v", c.Exact, c.FirstEvent)
	}

	var m Moment
	getJSON(t, srv, "/api/moment?trace=0&event=212", &m)
	if m.Event != 212 || m.Levels.Allocated != 576424960 || len(m.Segments) == 0 || len(m.Largest) == 0 || m.Sites.Bytes != 576424960 {
		t.Fatalf("moment at the allocated peak: event %d, levels %+v, %d segments, %d largest", m.Event, m.Levels, len(m.Segments), len(m.Largest))
	}
	var alloc int64
	for _, g := range m.Segments {
		alloc += g.Allocated
	}
	if alloc != m.Levels.Allocated {
		t.Errorf("segments hold %d allocated, levels %d", alloc, m.Levels.Allocated)
	}
	if len(m.Stacks[itoa(int(m.Largest[0].Stack))]) == 0 {
		t.Errorf("no stack for the largest block (stack %d)", m.Largest[0].Stack)
	}

	var st StackView
	getJSON(t, srv, "/api/stack?trace=0&stack="+itoa(int(m.Largest[0].Stack)), &st)
	if len(st.Frames) == 0 || st.Site != m.Largest[0].Site {
		t.Errorf("stack %+v; the block's site %q", st, m.Largest[0].Site)
	}

	for path, want := range map[string]string{
		"/api/timeline?trace=3":            "trace=3: the view has traces 0 to 0",
		"/api/timeline?trace=0&cols=x":     `cols="x": want an integer`,
		"/api/timeline?trace=0&cols=99999": "cols=99999: want 1 to 8192",
		"/api/moment?event=5000":           "event=5000: the trace has events 0 to 1724",
		"/api/moment?trace=-1":             "trace=-1: the view has traces 0 to 0",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.TrimSpace(string(body)) != want {
			t.Errorf("GET %s: %s %q, want 400 %q", path, resp.Status, body, want)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// The report is one file that loads nothing from elsewhere and carries
// the data the page needs.
func TestWriteReport(t *testing.T) {
	v := sampleView(t)
	var b bytes.Buffer
	if err := v.WriteReport(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if ext := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:|//)|@import|url\(\s*["']?https?:`).FindString(page); ext != "" {
		t.Errorf("the report refers to something outside it: %q", ext)
	}
	i := strings.Index(page, `<script type="application/json" id="tracer-data">`)
	j := strings.Index(page[max(i, 0):], "</script>")
	if i < 0 || j < 0 {
		t.Fatal("no embedded data")
	}
	var d reportData
	if err := json.Unmarshal([]byte(page[i+len(`<script type="application/json" id="tracer-data">`):i+j]), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Timelines) != 1 || len(d.Moments) != 1 || len(d.Moments[0]) < 20 || len(d.Stacks[0]) == 0 {
		t.Fatalf("report data: %d timelines, %d moments, %d stacks", len(d.Timelines), len(d.Moments[0]), len(d.Stacks[0]))
	}
	if !d.Timelines[0].Exact || len(d.Details[0]) != 0 {
		t.Errorf("the sample's timeline: exact %v, %d detail windows; want it whole, event by event", d.Timelines[0].Exact, len(d.Details[0]))
	}

	// A longer trace is saved at reportCols columns, and event by event
	// around its marks.
	tr, _ := synthetic(t, 60_000)
	b.Reset()
	if err := (&View{Traces: []*Trace{tr}}).WriteReport(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	page = b.String()
	i = strings.Index(page, `<script type="application/json" id="tracer-data">`)
	j = strings.Index(page[i:], "</script>")
	d = reportData{}
	if err := json.Unmarshal([]byte(page[i+len(`<script type="application/json" id="tracer-data">`):i+j]), &d); err != nil {
		t.Fatal(err)
	}
	if c := d.Timelines[0]; c.Exact || len(c.FirstEvent) > reportCols {
		t.Errorf("timeline: exact %v, %d columns", c.Exact, len(c.FirstEvent))
	}
	if len(d.Details[0]) != min(len(tr.marks), reportDetails) {
		t.Fatalf("%d detail windows for %d marks", len(d.Details[0]), len(tr.marks))
	}
	for k, w := range d.Details[0] {
		m := tr.marks[k]
		if !w.Exact || w.FirstEvent[0] > m.Event-reportWindow+1 || w.LastEvent[len(w.LastEvent)-1] < m.Event+reportWindow-1 {
			t.Errorf("window %d around event %d: exact %v, events %d to %d", k, m.Event, w.Exact, w.FirstEvent[0], w.LastEvent[len(w.LastEvent)-1])
		}
	}
}

// Requests are served at once (net/http runs each on its goroutine): the
// view is read-only after Load, and each answer gets its own analysis.
func TestHandler_concurrent(t *testing.T) {
	v := sampleView(t)
	srv := httptest.NewServer(v.Handler())
	defer srv.Close()
	want := v.Traces[0].Moment(0, 700)
	errs := make(chan error, 16)
	for g := range 16 {
		go func() {
			path := "/api/moment?trace=0&event=700"
			if g%2 == 1 {
				path = "/api/timeline?trace=0&x0=100&x1=900&cols=300"
			}
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if g%2 == 1 {
				errs <- nil
				return
			}
			var m Moment
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				errs <- err
				return
			}
			if m.Levels != want.Levels || len(m.Segments) != len(want.Segments) {
				errs <- fmt.Errorf("moment %+v, want %+v", m.Levels, want.Levels)
				return
			}
			errs <- nil
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
