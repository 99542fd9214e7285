package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/analysis"
)

// deprecatedKeys are written beside their snake_case replacements for one
// version (README, "JSON output").
var deprecatedKeys = append([]string{"Calls"}, analysis.DeprecatedJSONKeys...)

var snakeKey = regexp.MustCompile(`^[a-z0-9_.]+$`)

// Every command's --json output has snake_case keys (memory_stats() names
// keep their dots; device ordinals are digits), no null anywhere (an empty
// list is []), and names the kind of every stack id it prints. A command
// that gains --json must be added to runs.
func TestJSONKeys(t *testing.T) {
	dir := t.TempDir()
	oom := filepath.Join(dir, "oom.arrows")
	if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, "oom__default__seed1.pickle"), "-o", oom); code != 0 {
		t.Fatalf("import: %s", stderr)
	}
	split := filepath.Join(dir, "split.arrows")
	if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, "mlp_train__split32.pickle"), "-o", split); code != 0 {
		t.Fatalf("import: %s", stderr)
	}
	runs := map[string][][]string{
		"info":    {{}, {oom}, {oom, split}},
		"analyze": {{"--timeline"}, {oom, "--timeline"}, {oom, "--limit", "none"}, {oom, split}},
		"replay":  {{"--round", "4096"}, {oom, "--conf", "expandable_segments:True"}, {oom, split, "--round", "4096"}},
		"export":  {{"-o", filepath.Join(dir, "x.parquet")}},
		"diff":    {{oom, split}},
		"tune":    {{oom}},
	}
	for _, c := range newRootCmd(nil, nil).Commands() {
		if c.Flags().Lookup("json") == nil {
			continue
		}
		name := c.Name()
		if runs[name] == nil {
			t.Errorf("%s has --json but no run in TestJSONKeys", name)
		}
		for _, args := range runs[name] {
			args = append([]string{name, "--json"}, args...)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var v any
				tracerJSON(t, &v, args...)
				walkJSON(t, "", v)
			})
		}
	}
}

func walkJSON(t *testing.T, path string, v any) {
	t.Helper()
	switch x := v.(type) {
	case nil:
		t.Errorf("%s is null", path)
	case []any:
		for i, e := range x {
			if i < 3 { // the first few of each list: lists are uniform
				walkJSON(t, path+"[]", e)
			}
		}
	case map[string]any:
		for k, e := range x {
			if !snakeKey.MatchString(k) && !slices.Contains(deprecatedKeys, k) {
				t.Errorf("%s/%s: not snake_case", path, k)
			}
			if k == "stack" {
				if _, ok := x["stack_kind"]; !ok {
					t.Errorf("%s has a stack id and no stack_kind", path)
				}
			}
			walkJSON(t, path+"/"+k, e)
		}
	}
}

// The deprecated keys still carry their values for this version: a frame's
// Name beside its name, a timeline bucket's Series beside its series.
func TestJSONDeprecatedKeys(t *testing.T) {
	var out struct {
		Devices []struct {
			Sites []struct {
				StackKind string `json:"stack_kind"`
				Frames    []map[string]any
			}
			Timeline struct {
				Buckets []map[string]any
			}
		}
	}
	tracerJSON(t, &out, "analyze", "--json", "--timeline")
	d := out.Devices[0]
	kinds := map[string]bool{}
	for _, s := range d.Sites {
		kinds[s.StackKind] = true
		for _, f := range s.Frames {
			if f["name"] == "" || f["name"] != f["Name"] || f["line"] != f["Line"] {
				t.Errorf("frame %v: name/Name or line/Line differ", f)
			}
		}
	}
	if !kinds[analysis.StackNone] || !kinds[analysis.StackRecorded] {
		t.Errorf("stack kinds %v, want none (the backward's blocks) and recorded", kinds)
	}
	b := d.Timeline.Buckets[len(d.Timeline.Buckets)-1]
	series, _ := b["series"].(map[string]any)
	old, _ := b["Series"].([]any)
	if len(old) != int(analysis.NumSeries) || series["reserved"] == nil || !jsonEqual(series["reserved"], old[analysis.Reserved]) {
		t.Errorf("bucket series %v, Series %v", series, old)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
