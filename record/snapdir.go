package record

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SnapshotsIn lists the PyTorch snapshots in dir (not its subdirectories),
// sorted by name, for `tracer import DIR`: a folder of per-rank snapshots
// often holds other files too (logs, memory_stats() JSON, the traces of an
// earlier import), so each file is recognised by its content, not its name:
// a pickle (the 0x80 protocol byte), or JSON whose first bytes hold a
// snapshot's keys ("segments", "device_traces") or a bare segment list.
// Skipped are the other files' names. No snapshot at all is an error.
func SnapshotsIn(dir string) (snaps, skipped []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("import: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		p := filepath.Join(dir, name)
		if isSnapshot(p) {
			snaps = append(snaps, p)
		} else {
			skipped = append(skipped, name)
		}
	}
	slices.Sort(snaps)
	if len(snaps) == 0 {
		return nil, skipped, fmt.Errorf("import: %s holds no PyTorch snapshot (pickle or JSON from torch.cuda.memory._dump_snapshot)%s", dir, gzHint(skipped))
	}
	return snaps, skipped, nil
}

// gzHint tells a user whose snapshots are compressed what to do.
func gzHint(names []string) string {
	for _, n := range names {
		if strings.HasSuffix(n, ".gz") {
			return "; compressed files such as " + n + " must be decompressed first (gunzip)"
		}
	}
	return ""
}

// sniffLen is how much of a JSON file isSnapshot looks at: PyTorch writes
// a snapshot's "segments" key first.
const sniffLen = 64 << 10

// isSnapshot reports whether the regular file at p looks like a snapshot
// (see SnapshotsIn).
func isSnapshot(p string) bool {
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, sniffLen)
	n, _ := io.ReadFull(f, head)
	head = bytes.TrimLeft(head[:n], " \t\r\n")
	switch {
	case len(head) == 0:
		return false
	case head[0] == 0x80:
		return true
	case head[0] == '[':
		return bytes.Contains(head, []byte(`"blocks"`)) || bytes.Equal(bytes.TrimSpace(head[1:]), []byte("]"))
	case head[0] == '{':
		return bytes.Contains(head, []byte(`"segments"`)) || bytes.Contains(head, []byte(`"device_traces"`))
	}
	return false
}
