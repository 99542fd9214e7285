package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracer-dev/tracer/record/sample"
	"github.com/tracer-dev/tracer/view"
)

func TestViewFlags(t *testing.T) {
	var got *viewOptions
	cmd := newViewCmd(func(_ context.Context, o *viewOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"a.arrows", "b.arrows", "--conf", "expandable_segments:True", "--conf", "max_split_size_mb:64,roundup_power2_divisions:4",
		"--round", "4096", "--http", ":8080", "--open", "--time"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := &viewOptions{Paths: []string{"a.arrows", "b.arrows"}, HTTP: ":8080", Open: true, Time: true,
		Confs: []string{"expandable_segments:True", "max_split_size_mb:64,roundup_power2_divisions:4"}, Rounds: []int64{4096}}
	got.Out, got.Err = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("options %+v, want %+v", got, want)
	}
}

// Usage mistakes exit 2 with one line; bad inputs exit 1 naming the file.
func TestViewErrors(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.arrows")
	if err := os.WriteFile(tr, sample.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"view", "-o", filepath.Join(dir, "r.html"), "--http", ":0"}, 2, "-o writes a report file; --http and --open serve the view: pick one"},
		{[]string{"view", "--round", "1000"}, 2, "--round 1000: the rounding quantum must be a power of two"},
		{[]string{"view", "--conf", "bogus_key:1"}, 2, "--conf \"bogus_key:1\""},
		{[]string{"view", "--http", "256.1.1.1:99999"}, 2, "--http 256.1.1.1:99999:"},
		{[]string{"view", tr, "-o", tr}, 2, "t.arrows"},
		{[]string{"view", filepath.Join(dir, "missing.arrows")}, 1, "missing.arrows"},
		{[]string{"view", filepath.Join(snapshots, "mlp_train__default.pickle")}, 1, "this is a PyTorch snapshot, not a trace: run 'tracer import"},
	} {
		code, stdout, stderr := tracer(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 || stdout != "" {
			t.Errorf("tracer %s: exit %d, stderr %q, stdout %q; want %d and %q", strings.Join(tc.args[1:], " "), code, stderr, stdout, tc.code, tc.msg)
		}
	}
	if b, err := os.ReadFile(tr); err != nil || string(b) != string(sample.Bytes()) {
		t.Errorf("the input was changed")
	}
}

// An imported snapshot with OOMs and a replay beside it, as a report: one
// HTML file whose data names the OOMs, with why they failed, and the replay.
func TestViewReport(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "oom.arrows")
	if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, "oom__default__seed1.pickle"), "-o", tr); code != 0 {
		t.Fatalf("import: %s", stderr)
	}
	out := filepath.Join(dir, "report.html")
	code, stdout, stderr := tracer(t, "view", tr, "--conf", "expandable_segments:True", "-o", out)
	if code != 0 || !strings.HasPrefix(stdout, "wrote "+out) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="tracer-data"`, `"kind":"oom"`, "OOM: 76.0 MiB requested with 2.33 GiB reserved; fragmentation: 2.27 GiB live and the request fit in the 2.36 GiB the process could hold", "replayed: expandable_segments:True"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// The server prints its URL, answers, and Ctrl-C stops it with 130.
func TestViewServeSignalled(t *testing.T) {
	cmd := exec.Command(tracerBin(t), "view", "--http", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url, _, ok := strings.Cut(strings.TrimPrefix(line, "tracer view: "), " ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q", line)
	}
	resp, err := http.Get(url + "api/info")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var info view.Info
	if err := json.Unmarshal(body, &info); err != nil || len(info.Traces) != 1 || info.Traces[0].Events != 1725 {
		t.Fatalf("info %s (%v)", body, err)
	}
	go io.Copy(io.Discard, stdout)
	cmd.Process.Signal(syscall.SIGINT)
	if code := waitExit(t, cmd, 5*time.Second); code != 130 {
		t.Errorf("exit %d after SIGINT, want 130", code)
	}
}

// On every real snapshot, imported, each moment adds up: the segments'
// blocks sum to the moment's allocated and active bytes and lie inside
// their segments, the site icicle holds the allocated bytes, and the
// allocated peak's moment holds the peak.
func TestViewSnapshots(t *testing.T) {
	dir := t.TempDir()
	for _, name := range snapshotNames(t) {
		t.Run(name, func(t *testing.T) {
			tr := filepath.Join(dir, name+".arrows")
			if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, name+".pickle"), "-o", tr); code != 0 {
				t.Fatalf("import: %s", stderr)
			}
			v, err := view.Load(context.Background(), view.Options{Paths: []string{tr}})
			if err != nil {
				t.Fatal(err)
			}
			vt := v.Traces[0]
			n := vt.Events()
			peak := vt.Summary().Peaks.Allocated
			for _, ev := range []int64{0, n / 7, n / 3, n / 2, 2 * n / 3, n - 1, peak.Event} {
				m := vt.Moment(0, ev)
				var alloc, active int64
				for _, g := range m.Segments {
					var a, p int64
					for _, b := range g.Blocks {
						if b.Offset < 0 || b.Offset+b.Size > g.SizeBytes {
							t.Fatalf("event %d: a block at offset %d, %d bytes, outside segment %s of %d bytes", ev, b.Offset, b.Size, g.Addr, g.SizeBytes)
						}
						if b.Pending {
							p += b.Size
						} else {
							a += b.Size
						}
					}
					if a != g.Allocated || p != g.PendingFree || g.Allocated+g.PendingFree+g.SplitFree+g.Free != g.SizeBytes {
						t.Fatalf("event %d: segment %s: blocks %d allocated, %d pending; layout %+v", ev, g.Addr, a, p, g)
					}
					alloc += a
					active += a + p
				}
				if m.BlocksOmitted != 0 || m.Outside != 0 || alloc != m.Levels.Allocated || active != m.Levels.Active || m.Sites.Bytes != alloc {
					t.Fatalf("event %d: blocks sum to %d allocated, %d active (%d omitted, %d outside), icicle %d; levels %+v",
						ev, alloc, active, m.BlocksOmitted, m.Outside, m.Sites.Bytes, m.Levels)
				}
				if ev == peak.Event && m.Levels.Allocated != int64(peak.Bytes) {
					t.Errorf("the allocated peak's moment holds %d, the peak is %d", m.Levels.Allocated, peak.Bytes)
				}
			}
		})
	}
}
