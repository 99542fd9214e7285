package record

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tracer-dev/tracer/internal/outfile"
)

// outputPaths names each input's output, and refuses outputs that are
// inputs (snap.arrows that is a pickle would be replaced by its own trace)
// or that two inputs share (a/s.pickle and b/s.pickle into one directory),
// with an *outfile.ConflictError. With outDir, out is a directory even
// for one input.
func outputPaths(ins []string, out string, outDir bool) ([]string, error) {
	outs := make([]string, len(ins))
	from := map[string]string{} // cleaned output → its input
	for i, in := range ins {
		base := strings.TrimSuffix(filepath.Base(in), filepath.Ext(in)) + ".arrows"
		switch {
		case out == "":
			outs[i] = filepath.Join(filepath.Dir(in), base)
		case len(ins) == 1 && !outDir && !isDir(out):
			outs[i] = out
		case outfile.Direct(out):
			return nil, &outfile.ConflictError{Msg: fmt.Sprintf("import: %d snapshots cannot all be written to %s: give a directory", len(ins), out)}
		default:
			if err := os.MkdirAll(out, 0o755); err != nil {
				return nil, fmt.Errorf("import: %w", err)
			}
			outs[i] = filepath.Join(out, base)
		}
		if err := outfile.Check(outs[i], ins...); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		if outfile.Direct(outs[i]) {
			continue // written one after the other; nothing is replaced
		}
		if prev, ok := from[filepath.Clean(outs[i])]; ok {
			return nil, &outfile.ConflictError{Msg: fmt.Sprintf("import: %s and %s would both be written to %s: import them into different directories", prev, in, outs[i])}
		}
		from[filepath.Clean(outs[i])] = in
	}
	return outs, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
