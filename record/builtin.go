package record

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
)

// DefaultWorkload is what a plain `tracer record` runs: short, and it shows
// the caching allocator's signature effect, fragmentation.
const DefaultWorkload = "fragment-10mb"

// builtinFS holds the built-in workloads, the classic experiments of the
// articles tracer grew out of (shared/seeds), one file each. Their comments
// say which article and what it measured.
//
//go:embed workloads/*.workload
var builtinFS embed.FS

// builtins parses them on first use, not at init, so that a process that
// never runs a workload (an import, a plot) does not pay for them.
var builtins = sync.OnceValue(loadBuiltins)

func loadBuiltins() map[string]*Workload {
	m := map[string]*Workload{}
	files, err := fs.Glob(builtinFS, "workloads/*.workload")
	if err != nil {
		panic(err)
	}
	for _, f := range files {
		src, err := builtinFS.ReadFile(f)
		if err != nil {
			panic(err)
		}
		w, err := ParseWorkload(path.Base(f), src)
		if err != nil {
			panic(fmt.Sprintf("invariant violation: built-in workload: %v", err))
		}
		m[w.Name] = w
	}
	return m
}

// Builtins returns the built-in workloads sorted by name.
func Builtins() []*Workload {
	l := make([]*Workload, 0, len(builtins()))
	for _, w := range builtins() {
		l = append(l, w)
	}
	sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	return l
}

// Builtin returns the built-in workload called name.
func Builtin(name string) (*Workload, bool) {
	w, ok := builtins()[name]
	return w, ok
}

// LoadWorkload returns the built-in workload called arg or, failing that,
// parses the file at arg. A name that is neither says so and lists the
// built-ins.
func LoadWorkload(arg string) (*Workload, error) {
	if w, ok := builtins()[arg]; ok {
		return w, nil
	}
	src, err := os.ReadFile(arg)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(arg, `/\.`) {
			names := make([]string, 0, len(builtins()))
			for _, w := range Builtins() {
				names = append(names, w.Name)
			}
			return nil, fmt.Errorf("record: no built-in workload %q and no such file (built-ins: %s)", arg, strings.Join(names, ", "))
		}
		return nil, fmt.Errorf("record: workload: %w", err)
	}
	return ParseWorkload(arg, src)
}
