// Command growth times every tracer command on each axis of issue 22 at n,
// 2n, 4n and 8n and prints a Markdown table of the seconds and the growth
// (1 is linear). Run from the repository root:
//
//	go run ./testdata/bench/growth [-runs 3] [-reruns 2] [-axes REGEXP] [-cmds REGEXP] [-scale 1] [-rss] [-tracer [NAME=]BIN,...]
//
// It builds tracer once, writes each axis's input (a workload, or a JSON
// snapshot) into a temporary folder, records or imports it into a trace,
// and times record or import, replay, analyze, plot (peak and segments),
// info, diff (of the trace with itself), export and tune on it. See usage
// for what the table reports.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// usage is the text of -h: what the table reports and how its verdict is
// made robust to a shared machine's noise.
const usage = `usage: go run ./testdata/bench/growth [flags]

Times every tracer command on each axis of issue 22 at n, 2n, 4n and 8n and
prints a Markdown table, a row per axis, command and binary:

  seconds   the least of the runs at each size of the command's CPU time
            (user + system; -clock wall for the wall clock): the least is
            the run the shared machine disturbed least. The runs go round
            the four sizes in turn (n, 2n, 4n, 8n, then n again), and with
            several binaries each size runs every binary in turn, so that a
            change of load falls on every size and binary alike.
  slope     the verdict: the least-squares slope of log t on log n over
            the four sizes (1 is linear, 2 quadratic); above 1.1 it is
            marked **>1.1**. All four sizes weigh in, so one disturbed size
            moves it less than it moves a single doubling.
  last doubling
            log2(t8n/t4n), the last doubling's exponent, beside it: growth
            that starts late (a cache outgrown, a structure rehashed at 8n)
            shows there first.
  runs      the runs each size had. A row whose slope is above 1.1, or one
            of whose three doublings is, is run again, -runs more at every
            size in turn, up to -reruns times while it stays so, and keeps
            the least of all: noise makes a run slower, not faster, so more
            runs take it out, and real growth stays, at every size alike.

With -rss, two columns more:

  peak MiB  the least of the runs at each size of the command's peak
            resident memory (GNU time's %M, which a command run through
            it reports for itself alone: a child of growth's own would
            inherit growth's peak as the floor of its ru_maxrss).
  bytes per n
            (peak at 8n - peak at n) / 7n: what each unit of the axis adds
            to the peak. Against the axis's live blocks and events at n
            (axes.go) it tells memory bounded by live blocks from memory
            bounded by events: few-live-churn keeps 1,000 blocks live at
            every size, so its bytes per n should be near 0.

The commands run with growth's environment, GOGC included (the table's
header names it): the collector is part of what a command costs its user.

Flags:
`

func main() {
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	runs := flag.Int("runs", 3, "runs of each command at each size; the least time is kept")
	reruns := flag.Int("reruns", 2, "at most this many more rounds of -runs for a row with its slope or a doubling above 1.1")
	axesRE := flag.String("axes", "", "only the axes whose name matches this regexp")
	cmdsRE := flag.String("cmds", "", "only the commands whose name matches this regexp")
	scale := flag.Float64("scale", 1, "multiply every axis's n by this")
	clock := flag.String("clock", "cpu", "cpu (user + system time of the command) or wall")
	bins := flag.String("tracer", "", "the tracer binaries to time, comma-separated, each NAME=PATH or PATH (default: built from ./cmd/tracer)")
	keep := flag.Bool("keep", false, "keep the folder of inputs and outputs, and print its path")
	rss := flag.Bool("rss", false, "also report each command's peak resident memory (runs it through "+timeBin+")")
	flag.Parse()
	if *clock != "cpu" && *clock != "wall" {
		fatal("-clock must be cpu or wall")
	}
	onlyAxes, err := regexp.Compile(*axesRE)
	if err != nil {
		fatal("-axes: %v", err)
	}
	onlyCmds, err := regexp.Compile(*cmdsRE)
	if err != nil {
		fatal("-cmds: %v", err)
	}
	dir, err := os.MkdirTemp("", "tracer-growth-")
	if err != nil {
		fatal("%v", err)
	}
	if *keep {
		fmt.Fprintln(os.Stderr, "inputs and outputs in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if *runs < 1 || *reruns < 0 {
		fatal("-runs must be at least 1 and -reruns at least 0")
	}
	t := timer{runs: *runs, reruns: *reruns, wall: *clock == "wall"}
	if *rss {
		if _, err := os.Stat(timeBin); err != nil {
			fatal("-rss needs GNU time: %v", err)
		}
		t.rssFile = filepath.Join(dir, "maxrss")
	}
	if *bins == "" {
		bin := filepath.Join(dir, "tracer")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/tracer").CombinedOutput(); err != nil {
			fatal("go build ./cmd/tracer: %v\n%s", err, out)
		}
		t.bins, t.names = []string{bin}, []string{""}
	} else {
		for _, b := range strings.Split(*bins, ",") {
			name, path, ok := strings.Cut(b, "=")
			if !ok {
				name, path = filepath.Base(b), b
			}
			if _, err := os.Stat(path); err != nil {
				fatal("-tracer: %v", err)
			}
			t.bins, t.names = append(t.bins, path), append(t.names, name)
		}
	}
	column, sep := "", ""
	if len(t.bins) > 1 {
		column, sep = " tracer |", "---|"
	}
	rssColumns, rssSep := "", ""
	if *rss {
		rssColumns, rssSep = " peak MiB at n, 2n, 4n, 8n (least) | bytes per n |", "---|---|"
	}

	gogc := "GOGC unset"
	if v, ok := os.LookupEnv("GOGC"); ok {
		gogc = "GOGC=" + v
	}
	fmt.Printf("| axis | n | command |%s seconds at n, 2n, 4n, 8n (%s, least of the runs, %s) | slope | last doubling | runs |%s\n", column, *clock, gogc, rssColumns)
	fmt.Println("|---|---|---|" + sep + "---|---|---|---|" + rssSep)
	for _, ax := range axes {
		if !onlyAxes.MatchString(ax.name) {
			continue
		}
		n := int(math.Round(float64(ax.base) * *scale))
		rows := map[string][]timed{}
		var order []string
		add := func(cmd string, ts []timed) {
			rows[cmd] = ts
			order = append(order, cmd)
		}
		var bases [4]string
		for k := range bases {
			size := n << k
			bases[k] = filepath.Join(dir, fmt.Sprintf("%s-%d", ax.name, size))
			if ax.workload != nil {
				write(bases[k]+".workload", ax.workload(size))
			} else {
				write(bases[k]+".json", ax.snapshot(size))
			}
		}
		if ax.workload != nil {
			add("record --workload", t.sizes(func(k int) []string {
				args := []string{"record", "--workload", bases[k] + ".workload", "--device", "sim", "--sim-memory", "64TiB", "-o", bases[k] + ".arrows"}
				if ax.conf != "" {
					args = append(args, "--conf", ax.conf)
				}
				return args
			}))
		} else {
			add("import", t.sizes(func(k int) []string { return []string{"import", bases[k] + ".json", "-o", bases[k] + ".arrows"} }))
		}
		cmds := []struct {
			name string
			args func(base, tr string) []string
		}{
			{"replay", func(_, tr string) []string { return []string{"replay", tr} }},
			{"replay --round 4096", func(_, tr string) []string { return []string{"replay", tr, "--round", "4096"} }},
			{"analyze", func(_, tr string) []string { return []string{"analyze", tr} }},
			{"analyze --json --timeline", func(_, tr string) []string { return []string{"analyze", tr, "--json", "--timeline"} }},
			{"plot peak", func(base, tr string) []string { return []string{"plot", base + "-peak.png", tr} }},
			{"plot segments", func(base, tr string) []string {
				return []string{"plot", base + "-segments.png", tr, "--kind", "segments"}
			}},
			{"info", func(_, tr string) []string { return []string{"info", tr} }},
			{"diff", func(_, tr string) []string { return []string{"diff", tr, tr} }},
			{"export", func(base, tr string) []string { return []string{"export", tr, "-o", base + ".parquet"} }},
			{"tune", func(_, tr string) []string { return []string{"tune", tr} }},
		}
		for _, c := range cmds {
			if onlyCmds.MatchString(c.name) {
				add(c.name, t.sizes(func(k int) []string { return c.args(bases[k], bases[k]+".arrows") }))
			}
		}
		if !*keep {
			for _, base := range bases {
				matches, _ := filepath.Glob(base + "*")
				for _, m := range matches {
					os.Remove(m)
				}
			}
		}
		for _, cmd := range order {
			if !onlyCmds.MatchString(cmd) && cmd != "record --workload" && cmd != "import" {
				continue
			}
			for b, r := range rows[cmd] {
				name := ""
				if column != "" {
					name = " " + t.names[b] + " |"
				}
				ts := r.best
				var cells []string
				for _, d := range ts {
					if d < 0 {
						cells = append(cells, "failed")
					} else {
						cells = append(cells, fmt.Sprintf("%.3f", d.Seconds()))
					}
				}
				if slices.Contains(ts[:], -1) {
					fmt.Printf("| %s | %d | %s |%s %s (see stderr) | | | |%s\n", ax.name, n, cmd, name, strings.Join(cells, " / "), strings.Repeat(" |", len(rssSep)/4))
					continue
				}
				slope, dbl := growth(&ts)
				mark := ""
				if slope > 1.1 {
					mark = " **>1.1**"
				}
				mem := ""
				if *rss {
					mem = " " + memCells(r.rss, n) + " |"
				}
				fmt.Printf("| %s | %d | %s |%s %s | %.2f%s | %.2f | %d |%s\n", ax.name, n, cmd, name, strings.Join(cells, " / "), slope, mark, dbl[2], r.runs, mem)
			}
		}
	}
}

// memCells returns the peak MiB cells of rss (KiB at n..8n) and the bytes
// per n from n to 8n, or "?" where GNU time said nothing.
func memCells(rss [4]int64, n int) string {
	var cells []string
	for _, kb := range rss {
		if kb <= 0 {
			return "? | ?"
		}
		cells = append(cells, fmt.Sprintf("%.1f", float64(kb)/1024))
	}
	return fmt.Sprintf("%s | %.0f", strings.Join(cells, " / "), float64(rss[3]-rss[0])*1024/float64(7*n))
}

// growth returns the least-squares slope of log2 t on log2 n over the four
// sizes and the exponent of each doubling, log2(t2n/tn), log2(t4n/t2n) and
// log2(t8n/t4n).
func growth(ts *[4]time.Duration) (slope float64, dbl [3]float64) {
	var sy, sxy float64
	var y [4]float64
	for k, d := range ts {
		y[k] = math.Log2(float64(d) + 1)
		sy += y[k]
		sxy += float64(k) * y[k]
	}
	for k := range dbl {
		dbl[k] = y[k+1] - y[k]
	}
	// x = 0..3: mean 1.5, sum of squared deviations 5.
	return (sxy - 1.5*sy) / 5, dbl
}

// suspect reports whether times ts call for more runs: a slope or a
// doubling above 1.1.
func suspect(ts *[4]time.Duration) bool {
	slope, dbl := growth(ts)
	return slope > 1.1 || slices.Max(dbl[:]) > 1.1
}

// timeBin is GNU time, which -rss runs the commands through.
const timeBin = "/usr/bin/time"

// timer runs tracer commands and keeps the least time of runs.
type timer struct {
	bins, names []string // the binaries timed and their names in the table
	runs        int
	reruns      int // rounds of runs more for a suspect row
	wall        bool
	rssFile     string // where GNU time writes a run's peak RSS; "" without -rss
}

// timed is one binary's row: its least time at each size (-1 where a run
// failed), its least peak RSS in KiB at each size (with -rss) and the runs
// each size had.
type timed struct {
	best [4]time.Duration
	rss  [4]int64
	runs int
}

// sizes runs each binary with args(k) for each size k in turn, t.runs
// times round, then t.runs more, up to t.reruns times, while a binary's
// times are suspect (every binary again, so that they share the load
// alike); it returns each binary's least time at each size, or -1 for a
// size where a run failed, after saying on stderr why (that size is not
// run again).
func (t timer) sizes(args func(k int) []string) []timed {
	rows := make([]timed, len(t.bins))
	t.round(rows, args)
	for range t.reruns {
		if !slices.ContainsFunc(rows, func(r timed) bool {
			return !slices.Contains(r.best[:], -1) && suspect(&r.best)
		}) {
			break
		}
		t.round(rows, args)
	}
	return rows
}

// round runs every binary t.runs times round the sizes, keeping in rows
// the least time of each.
func (t timer) round(rows []timed, args func(k int) []string) {
	for range t.runs {
		for k := range 4 {
			for b, bin := range t.bins {
				best := &rows[b].best[k]
				if *best < 0 {
					continue
				}
				d, kb := t.once(bin, args(k))
				if d < 0 || *best == 0 || d < *best {
					*best = d
				}
				if rss := &rows[b].rss[k]; kb > 0 && (*rss == 0 || kb < *rss) {
					*rss = kb
				}
			}
		}
	}
	for b := range rows {
		rows[b].runs += t.runs
	}
}

// once runs bin with args and returns its time, or -1 after saying on
// stderr why it failed, and with -rss its peak RSS in KiB (0 if unknown).
// Through GNU time its CPU time is the command's and time's own, a
// millisecond or less.
func (t timer) once(bin string, args []string) (time.Duration, int64) {
	cmd := exec.Command(bin, args...)
	if t.rssFile != "" {
		os.Remove(t.rssFile)
		cmd = exec.Command(timeBin, append([]string{"-f", "%M", "-o", t.rssFile, bin}, args...)...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		fmt.Fprintf(os.Stderr, "growth: tracer %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
		return -1, 0
	}
	if !t.wall {
		d = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	var kb int64
	if t.rssFile != "" {
		b, _ := os.ReadFile(t.rssFile)
		kb, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	return d, kb
}

func write(path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		fatal("%v", err)
	}
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "growth: "+format+"\n", args...)
	os.Exit(1)
}
