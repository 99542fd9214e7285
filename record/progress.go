package record

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tracer-dev/tracer/allocator"
)

// progress rewrites one status line on a terminal during a long recording:
// where the workload is, how many events so far, and what is reserved. It
// prints nothing for runs shorter than one period, so quick runs stay quiet.
type progress struct {
	out   io.Writer // nil: no progress
	name  string
	every time.Duration
	start time.Time
	last  time.Time
	width int // of the last line, to blank it
}

func (p *progress) update(pos string, events int64, a *allocator.Allocator) {
	if p.out == nil {
		return
	}
	now := time.Now()
	if p.start.IsZero() {
		p.start, p.last = now, now
		return
	}
	if now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	st := a.Stats()
	line := fmt.Sprintf("recording %s: %s, %s events, reserved %s, allocated %s",
		p.name, pos, countString(events), allocator.FormatSize(st.ReservedBytes[0].Current),
		allocator.FormatSize(st.AllocatedBytes[0].Current))
	pad := ""
	if len(line) < p.width {
		pad = strings.Repeat(" ", p.width-len(line))
	}
	p.width = len(line)
	fmt.Fprintf(p.out, "%s%s\r", line, pad)
}

// done blanks the status line, if one was printed.
func (p *progress) done() {
	if p.out != nil && p.width > 0 {
		fmt.Fprintf(p.out, "%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
}

// countString prints n with a metric suffix: 950, 12.3K, 4.19M.
func countString(n int64) string {
	switch {
	case n < 1e4:
		return fmt.Sprint(n)
	case n < 1e6:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2fG", float64(n)/1e9)
}
