package view

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/trace"
)

// The browser tests drive headless Chromium through the DevTools protocol.
// They skip where no Chromium is installed, unless TRACER_BROWSER_TESTS=1
// (CI sets it), which makes a missing browser a failure.
// TRACER_VIEW_SCREENSHOTS=DIR saves a screenshot of each view there.

// browser starts a headless Chromium and returns a context for its tab and
// the console errors the page wrote so far.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path := os.Getenv("TRACER_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path != "" {
			break
		}
		path, _ = exec.LookPath(name)
	}
	if path == "" {
		if os.Getenv("TRACER_BROWSER_TESTS") == "1" {
			t.Fatal("TRACER_BROWSER_TESTS=1 but no Chromium found (install the chromium package, or set TRACER_CHROMIUM)")
		}
		t.Skip("no Chromium installed; the browser tests need one (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	var mu sync.Mutex
	var errs []string
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				errs = append(errs, m.String())
				mu.Unlock()
			}
		}
	}()
	return ctx, func() []string {
		time.Sleep(100 * time.Millisecond) // let the last messages arrive
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// waitText waits until the text of sel contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	js := fmt.Sprintf(`(document.querySelector(%q) || {textContent: ''}).textContent.includes(%q)`, sel, want)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](js)); err != nil {
		t.Fatalf("%s never showed %q; it shows %q", sel, want, text(t, ctx, sel))
	}
}

// screenshot saves the element sel as NAME.png in $TRACER_VIEW_SCREENSHOTS.
func screenshot(t *testing.T, ctx context.Context, sel, name string) {
	t.Helper()
	dir := os.Getenv("TRACER_VIEW_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// idle waits until the page has drawn the range it last asked for.
func idle(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`canvas.dataset.busy === '0'`)); err != nil {
		t.Fatalf("the timeline never finished loading: %v", err)
	}
}

// clickEvent clicks the timeline where event ev is drawn.
func clickEvent(t *testing.T, ctx context.Context, ev int) {
	t.Helper()
	idle(t, ctx)
	xy := eval[[]float64](t, ctx, fmt.Sprintf(`(() => { const r = canvas.getBoundingClientRect(); return [r.left + px(%d) + 0.5, r.top + 120]; })()`, ev))
	run(t, ctx, chromedp.MouseClickXY(xy[0], xy[1]))
}

// The served view of the built-in sample with a replay overlaid: it loads
// without console errors, draws, zooms, and a click at the allocated peak
// shows that moment's segments, sites and largest blocks.
func TestBrowser_serve(t *testing.T) {
	ctx, consoleErrors := browser(t)
	v, err := Load(context.Background(), Options{Replays: []pipeline.Settings{{Round: 4096}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(v.Handler())
	defer srv.Close()

	run(t, ctx, chromedp.Navigate(srv.URL))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`+document.getElementById('timeline').dataset.drawn > 0`)); err != nil {
		t.Fatalf("the timeline was never drawn: %v", err)
	}
	waitText(t, ctx, "#range", "showing event 0 to event 1,724 (1,724 events)")
	waitText(t, ctx, "#legend", "replayed: --round 4096")
	if !eval[bool](t, ctx, `state.cols.length === 2 && state.cols[1].x_start.length > 100 && state.cols[1].series[1] === 'reserved'`) {
		t.Errorf("the replay's columns were not loaded for the overlay")
	}
	screenshot(t, ctx, "body", "view-compare")

	// Zoom: the visible range halves around its centre.
	run(t, ctx, chromedp.Click(chromedp.CSS("#zoom-in")))
	waitText(t, ctx, "#range", "showing event 431 to event 1,293 (862 events)")
	run(t, ctx, chromedp.Click(chromedp.CSS("#reset")))
	waitText(t, ctx, "#range", "(1,724 events)")

	// Click the allocated peak.
	peak := v.Traces[0].sum.Peaks.Allocated
	want := v.Traces[0].Moment(0, peak.Event)
	clickEvent(t, ctx, int(peak.Event))
	waitText(t, ctx, "#moment-head", fmt.Sprintf("after event %d ", peak.Event))
	waitText(t, ctx, "#moment-head", "allocated 549.7 MiB")
	waitText(t, ctx, "#moment-head", "allocated peak 549.7 MiB") // the mark's label
	waitText(t, ctx, "#segments-summary", fmt.Sprintf("%d segments: 549.7 MiB allocated", len(want.Segments)))
	waitText(t, ctx, "#largest", want.Largest[0].Site)
	waitText(t, ctx, "#largest", "live at the end") // the lifetime of a block never freed
	waitText(t, ctx, "#largest", "1,483 events")    // and of one freed
	if n := eval[int](t, ctx, `document.querySelectorAll('#segments .segment').length`); n != len(want.Segments) {
		t.Errorf("%d segment rows, want %d", n, len(want.Segments))
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#icicle .node').length`); n < 3 {
		t.Errorf("%d icicle nodes", n)
	}

	// → steps the moment one event on, ← back.
	run(t, ctx, chromedp.KeyEvent(kb.ArrowRight))
	waitText(t, ctx, "#moment-head", fmt.Sprintf("after event %d ", peak.Event+1))
	run(t, ctx, chromedp.KeyEvent(kb.ArrowLeft))
	waitText(t, ctx, "#moment-head", fmt.Sprintf("after event %d ", peak.Event))

	// A click on a frame of the icicle zooms into it; on the top frame, back out.
	top := want.Sites.Children[0]
	run(t, ctx, chromedp.Click(chromedp.CSS(`#icicle .node[data-path='["`+top.Name+`"]']`)))
	waitText(t, ctx, "#sites-summary", "allocated under "+top.Name)
	run(t, ctx, chromedp.Click(chromedp.CSS(`#icicle .node`)))
	waitText(t, ctx, "#sites-summary", "549.7 MiB allocated; outermost frame at the top")

	// Hover a block of the largest segment: its whole stack.
	xy := eval[[]float64](t, ctx, `(() => { const r = document.querySelector('#segments .b').getBoundingClientRect(); return [r.left + 1, r.top + r.height / 2]; })()`)
	run(t, ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, xy[0], xy[1]))
	sid := eval[int](t, ctx, `+document.querySelector('#segments .b').dataset.stack`)
	frames := stackLines(v.Traces[0].stack(trace.StackID(sid)))
	if len(frames) == 0 {
		t.Fatalf("the first block's stack %d has no frames", sid)
	}
	waitText(t, ctx, "#tip", frames[len(frames)-1])
	screenshot(t, ctx, "body", "view-moment")
	screenshot(t, ctx, "#chart", "view-timeline")
	screenshot(t, ctx, "#segments-panel", "view-segments")
	screenshot(t, ctx, "#sites-panel", "view-sites")

	// Wheel zoom at the peak, down to single events. (The protocol's
	// mouseWheel needs deltaX, which cdproto omits when zero: the page gets
	// its wheel events from a script instead.)
	for range 8 {
		eval[bool](t, ctx, fmt.Sprintf(`(() => { const r = canvas.getBoundingClientRect();
			return canvas.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + px(%d), clientY: r.top + 100, bubbles: true, cancelable: true})); })()`, peak.Event))
		idle(t, ctx)
	}
	span := eval[float64](t, ctx, `state.x1 - state.x0`)
	if span > 1724*0.2 {
		t.Errorf("after 8 wheel steps the view spans %.0f events", span)
	}
	waitText(t, ctx, "#range", "events)")
	screenshot(t, ctx, "#chart", "view-zoomed")

	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// The report opens from a file, draws, and a click shows the nearest
// saved moment.
func TestBrowser_report(t *testing.T) {
	ctx, consoleErrors := browser(t)
	v := sampleView(t)
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.WriteReport(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run(t, ctx, chromedp.Navigate("file://"+path))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`+document.getElementById('timeline').dataset.drawn > 0`)); err != nil {
		t.Fatalf("the report's timeline was never drawn: %v", err)
	}
	waitText(t, ctx, "#range", "(1,724 events)")
	peak := v.Traces[0].sum.Peaks.Allocated
	clickEvent(t, ctx, int(peak.Event))
	waitText(t, ctx, "#moment-head", fmt.Sprintf("after event %d ", peak.Event))
	waitText(t, ctx, "#moment-head", "the nearest moment this report saved")
	waitText(t, ctx, "#segments-summary", "549.7 MiB allocated")
	run(t, ctx, chromedp.Click(chromedp.CSS("#zoom-in")))
	waitText(t, ctx, "#range", "(862 events)")
	screenshot(t, ctx, "body", "report")

	// A longer trace's report zooms to single events around its peak.
	tr, _ := synthetic(t, 60_000)
	f, err = os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&View{Traces: []*Trace{tr}}).WriteReport(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p := tr.sum.Peaks.Allocated.Event
	run(t, ctx, chromedp.Navigate(fmt.Sprintf("file://%s#x0=%d&x1=%d", path, p-300, p+300)))
	run(t, ctx, chromedp.Reload())
	idle(t, ctx)
	waitText(t, ctx, "#range", "(600 events)")
	if !eval[bool](t, ctx, `state.cols[0].exact && state.cols[0].first_event.length > 500 && state.cols[0].first_event.every((e, i) => e === state.cols[0].last_event[i])`) {
		t.Errorf("zoomed in around the peak, the report does not draw single events")
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
