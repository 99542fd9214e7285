package main

import (
	"os"
	"strings"
	"testing"
)

// The README's first command, between its first:begin and first:end marks,
// prints what the README shows, and shows a change: a first command whose
// replay changes nothing would teach a reader nothing.
func TestReadmeFirstCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	begin, end := strings.Index(s, "<!-- first:begin"), strings.Index(s, "<!-- first:end -->")
	if begin < 0 || end < begin {
		t.Fatal("README.md has no first:begin/first:end marks")
	}
	block := s[begin:end]
	open := strings.Index(block, "```console\n")
	if open < 0 {
		t.Fatal("README.md's first command is not in a ```console block")
	}
	block = block[open+len("```console\n"):]
	close := strings.Index(block, "```\n")
	if close < 0 {
		t.Fatal("README.md's first command's block is not closed")
	}
	cmdLine, want, _ := strings.Cut(block[:close], "\n")
	args, ok := strings.CutPrefix(cmdLine, "$ tracer ")
	if !ok {
		t.Fatalf("README.md's first command %q does not start with \"$ tracer \"", cmdLine)
	}
	code, stdout, stderr := tracer(t, strings.Fields(args)...)
	if code != 0 {
		t.Fatalf("tracer %s: exit %d: %s", args, code, stderr)
	}
	if stdout != want {
		t.Errorf("tracer %s prints\n%s\nREADME.md shows\n%s", args, stdout, want)
	}
	var changed bool
	for _, line := range strings.Split(want, "\n") {
		if strings.HasPrefix(line, "reserved peak") && !strings.HasSuffix(line, "=") {
			changed = true
		}
	}
	if !changed {
		t.Errorf("README.md's first command leaves the reserved peak unchanged:\n%s", want)
	}
}
