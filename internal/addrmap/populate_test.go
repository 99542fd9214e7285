package addrmap

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/internal/cputime"
	"github.com/tracer-dev/tracer/internal/grow"
)

// TestResizePopulates: a table of populateMin bytes or more that a rehash
// fills densely is faulted in before the rehash (resizeIn), so that no page of it is read before
// it is written: inserting 700,000 keys (tables of 64k to 2M 16-byte
// slots, 63 MB) takes about one minor fault a page, where a page the
// rehash's probes read first took two (the zero page's, then the copy's).
// In a process of its own, with the collector off, so that every table
// is fresh memory. It fails without the populate.
func TestResizePopulates(t *testing.T) {
	const n = 700_000
	if raceBuild {
		t.Skip("the race detector's shadow memory faults beside the table")
	}
	if os.Getenv("ADDRMAP_POPULATE_CHILD") != "" {
		debug.SetGCPercent(-1)
		runtime.LockOSThread()
		var m Map[uint64]
		f0 := cputime.ThreadFaults()
		for k := uint64(1); k <= n; k++ {
			m.Put(k*0x9e3779b97f4a7c15, k)
		}
		fmt.Printf("faults %d slots %d\n", cputime.ThreadFaults()-f0, len(m.slots))
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("thread faults are counted on Linux")
	}
	if probe := make([]byte, 1<<16); !grow.PagesOf(probe).Populate(0, len(probe)) {
		t.Skip("no MADV_POPULATE_WRITE on this system")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestResizePopulates$")
	cmd.Env = append(os.Environ(), "ADDRMAP_POPULATE_CHILD=1")
	out, err := cmd.CombinedOutput()
	var faults, slots int
	if err != nil || len(strings.Fields(string(out))) < 4 {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := fmt.Sscanf(string(out), "faults %d slots %d", &faults, &slots); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The tables of 64k slots and more, each twice the last, the last
	// slots: about 2 x slots x 16 bytes.
	pages := 2 * slots * 16 / os.Getpagesize()
	t.Logf("%d minor faults for %d pages of tables", faults, pages)
	if faults > pages*13/10 {
		t.Errorf("%d minor faults inserting %d keys, %d pages of tables: want about one a page", faults, n, pages)
	}
}
