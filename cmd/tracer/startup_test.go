package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Package-level work of our own packages, as GODEBUG=inittrace=1 counts it
// (allocations, not time): every tracer command pays for it before it does
// anything. A table, a regexp or a map built at init belongs behind a
// sync.OnceValue at its first use; errors.New and a few small values are
// fine.
const (
	maxInitAllocs = 8    // per package
	maxInitBytes  = 1024 // per package
)

// TestStartupInits fails if a package of ours (or main) allocates more than a
// few small values at init, or if plots has an init again: its fonts'
// pages are released by main's single textpages.Release.
func TestStartupInits(t *testing.T) {
	cmd := exec.Command(tracerBin(t), "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tracer version: %v\n%s", err, stderr.String())
	}
	inits := initAllocs(stderr.String())
	ours := 0
	for pkg, a := range inits {
		if pkg != "main" && !strings.HasPrefix(pkg, "github.com/tracer-dev/tracer/") {
			continue
		}
		ours++
		if a.allocs > maxInitAllocs || a.bytes > maxInitBytes {
			t.Errorf("init of %s: %d allocations, %d bytes; want at most %d and %d (make it lazy: sync.OnceValue)",
				pkg, a.allocs, a.bytes, maxInitAllocs, maxInitBytes)
		}
	}
	if ours < 5 || len(inits) < 50 {
		t.Fatalf("inittrace listed %d inits, %d of ours: not the format expected\n%s", len(inits), ours, stderr.String())
	}
	if a, ok := inits["github.com/tracer-dev/tracer/plots"]; ok && a.allocs > 0 {
		t.Errorf("plots' init allocates (%d): the font pages are main's to release", a.allocs)
	}
}

type initCost struct{ bytes, allocs int }

// initAllocs reads GODEBUG=inittrace=1 lines, "init PKG @T ms, C ms clock,
// B bytes, A allocs", into each package's bytes and allocations.
func initAllocs(out string) map[string]initCost {
	inits := map[string]initCost{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 11 || f[0] != "init" || f[8] != "bytes," || f[10] != "allocs" {
			continue
		}
		b, err1 := strconv.Atoi(f[7])
		a, err2 := strconv.Atoi(f[9])
		if err1 == nil && err2 == nil {
			inits[f[1]] = initCost{b, a}
		}
	}
	return inits
}

func TestInitAllocs(t *testing.T) {
	got := initAllocs("init main @59 ms, 0.096 ms clock, 7824 bytes, 37 allocs\nnoise\n" +
		"init github.com/x/y @1.2 ms, 3.0 ms clock, 0 bytes, 0 allocs\n")
	if len(got) != 2 || got["main"] != (initCost{7824, 37}) || got["github.com/x/y"] != (initCost{}) {
		t.Fatalf("initAllocs = %v", got)
	}
}
