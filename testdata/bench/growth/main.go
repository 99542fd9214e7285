// Command growth times every tracer command on each axis of issue 22 at n,
// 2n, 4n and 8n and prints a Markdown table of the seconds and the growth:
// the exponent log2(t8n/t4n) and the least-squares slope of log t on log n
// (1 is linear). Run from the repository root:
//
//	go run ./testdata/bench/growth [-runs 3] [-axes REGEXP] [-cmds REGEXP] [-scale 1] [-tracer [NAME=]BIN,...]
//
// It builds tracer once, writes each axis's input (a workload, or a JSON
// snapshot) into a temporary folder, records or imports it into a trace,
// and times record or import, replay, analyze, plot (peak and segments) and
// info on it. A time is the least of -runs runs of the command's CPU time
// (user + system; -clock wall for the wall clock): the least is the run the
// shared machine disturbed least. The runs of a command go round the four
// sizes in turn (n, 2n, 4n, 8n, then n again), so that a change in the
// machine's load while a command is timed falls on every size alike,
// rather than on the sizes timed last. With several binaries (-tracer
// main=OLD,branch=NEW) each run of a size runs every binary in turn, so that
// they share the load alike too, and the table has a row per binary. The
// commands run with the environment
// growth has, GOGC included, which the table's header names: the collector
// is part of what a command costs its user.
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
	"strings"
	"time"
)

func main() {
	runs := flag.Int("runs", 3, "runs of each command at each size; the least time is kept")
	axesRE := flag.String("axes", "", "only the axes whose name matches this regexp")
	cmdsRE := flag.String("cmds", "", "only the commands whose name matches this regexp")
	scale := flag.Float64("scale", 1, "multiply every axis's n by this")
	clock := flag.String("clock", "cpu", "cpu (user + system time of the command) or wall")
	bins := flag.String("tracer", "", "the tracer binaries to time, comma-separated, each NAME=PATH or PATH (default: built from ./cmd/tracer)")
	keep := flag.Bool("keep", false, "keep the folder of inputs and outputs, and print its path")
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
	t := timer{runs: *runs, wall: *clock == "wall"}
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

	gogc := "GOGC unset"
	if v, ok := os.LookupEnv("GOGC"); ok {
		gogc = "GOGC=" + v
	}
	fmt.Printf("| axis | n | command |%s seconds at n, 2n, 4n, 8n (%s, least of %d, %s) | exponent | slope |\n", column, *clock, *runs, gogc)
	fmt.Println("|---|---|---|" + sep + "---|---|---|")
	for _, ax := range axes {
		if !onlyAxes.MatchString(ax.name) {
			continue
		}
		n := int(math.Round(float64(ax.base) * *scale))
		rows := map[string][][4]time.Duration{}
		var order []string
		add := func(cmd string, ts [][4]time.Duration) {
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
			for b, ts := range rows[cmd] {
				name := ""
				if column != "" {
					name = " " + t.names[b] + " |"
				}
				var cells []string
				for _, d := range ts {
					if d < 0 {
						cells = append(cells, "failed")
					} else {
						cells = append(cells, fmt.Sprintf("%.3f", d.Seconds()))
					}
				}
				if slices.Contains(ts[:], -1) {
					fmt.Printf("| %s | %d | %s |%s %s (see stderr) | | |\n", ax.name, n, cmd, name, strings.Join(cells, " / "))
					continue
				}
				exp, slope := growth(&ts)
				mark := ""
				if exp > 1.1 {
					mark = " **>1.1**"
				}
				fmt.Printf("| %s | %d | %s |%s %s | %.2f%s | %.2f |\n", ax.name, n, cmd, name, strings.Join(cells, " / "), exp, mark, slope)
			}
		}
	}
}

// growth returns log2(t8n/t4n) and the least-squares slope of log2 t on
// log2 n over the four sizes.
func growth(ts *[4]time.Duration) (exp, slope float64) {
	var sy, sxy float64
	for k, d := range ts {
		y := math.Log2(float64(d) + 1)
		sy += y
		sxy += float64(k) * y
	}
	// x = 0..3: mean 1.5, sum of squared deviations 5.
	return math.Log2((float64(ts[3]) + 1) / (float64(ts[2]) + 1)), (sxy - 1.5*sy) / 5
}

// timer runs tracer commands and keeps the least time of runs.
type timer struct {
	bins, names []string // the binaries timed and their names in the table
	runs        int
	wall        bool
}

// sizes runs each binary with args(k) for each size k in turn, t.runs
// times round, and returns each binary's least time at each size, or -1
// for a size where a run failed, after saying on stderr why (that size is
// not run again).
func (t timer) sizes(args func(k int) []string) [][4]time.Duration {
	best := make([][4]time.Duration, len(t.bins))
	for range t.runs {
		for k := range 4 {
			for b, bin := range t.bins {
				if best[b][k] < 0 {
					continue
				}
				if d := t.once(bin, args(k)); d < 0 || best[b][k] == 0 || d < best[b][k] {
					best[b][k] = d
				}
			}
		}
	}
	return best
}

// once runs bin with args and returns its time, or -1 after saying on
// stderr why it failed.
func (t timer) once(bin string, args []string) time.Duration {
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		fmt.Fprintf(os.Stderr, "growth: tracer %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
		return -1
	}
	if !t.wall {
		d = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return d
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
