package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README's section on multi-rank runs and diffs shows real output:
// every "$ tracer ..." line of its console blocks, run on the same files
// (the DDP ranks of testdata/pairs, attention inference of
// testdata/snapshots), prints what the README says (stderr, then stdout).
func TestReadmeRanks(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "# Multi-rank runs and diffs")
	if start < 0 {
		t.Fatal("README.md has no section on multi-rank runs and diffs")
	}
	// The section runs to the next heading outside a code block.
	var section strings.Builder
	inCode := false
	for i, line := range strings.SplitAfter(text[start:], "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if i > 0 && !inCode && strings.HasPrefix(line, "#") {
			break
		}
		section.WriteString(line)
	}

	work := t.TempDir()
	snaps := filepath.Join(work, "snapshots")
	if err := os.Mkdir(snaps, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"rank0", "rank1"} {
		name := "ddp__retry." + r
		gunzip(t, filepath.Join(ddpSource("retry"), name+".pickle.gz"), filepath.Join(snaps, name+".pickle"))
		copyFile(t, filepath.Join(ddpSource("retry"), name+".stats.json"), filepath.Join(snaps, name+".stats.json"))
	}
	for name, snap := range map[string]string{"before": "attention_infer__default", "after": "attention_infer__pow2div8"} {
		if code, _, stderr := tracer(t, "import", filepath.Join(snapshots, snap+".pickle"), "-o", filepath.Join(work, name+".arrows")); code != 0 {
			t.Fatalf("import %s: %s", snap, stderr)
		}
	}
	t.Chdir(work)

	ran := 0
	for i, block := range strings.Split(section.String(), "```console\n")[1:] {
		block = block[:strings.Index(block, "```")]
		cmds := strings.Split("\n"+block, "\n$ ")[1:]
		for _, c := range cmds {
			line, want, _ := strings.Cut(c, "\n")
			want = strings.TrimSuffix(want, "\n") + "\n"
			args := strings.Fields(line)
			if args[0] != "tracer" {
				t.Fatalf("block %d: %q is not a tracer command", i, line)
			}
			code, stdout, stderr := tracer(t, args[1:]...)
			if got := stderr + stdout; code != 0 || got != want {
				t.Errorf("README: $ %s: exit %d\n%s", line, code, lineDiff(want, got))
			}
			ran++
		}
	}
	if ran < 4 {
		t.Errorf("ran %d commands of the README, want at least 4", ran)
	}
}
