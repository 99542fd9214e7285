package main

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagError turns pflag's errors into usage errors, and an unknown flag's
// into one that names the flags it may have meant: "unknown flag: --lmit
// (did you mean --limit?)".
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var typed string
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		typed = strings.TrimPrefix(msg, "unknown flag: --")
	case strings.HasPrefix(msg, "unknown shorthand flag: "):
		// "unknown shorthand flag: 'l' in -limit": a long flag with one dash.
		if _, word, ok := strings.Cut(msg, " in -"); ok && len(word) > 1 {
			typed = word
		}
	}
	if typed != "" {
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if s := suggest(typed, names); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean --%s?)", strings.Join(s, " or --"))
		}
	}
	return &usageError{msg}
}

// unknownCommand is compiled at the first error, not at every start.
var unknownCommand = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^unknown command "(.*)" for "tracer"`)
})

// commandError rewrites cobra's unknown-command error, several lines with
// its suggestions, as one: `unknown command "replya" (did you mean
// replay?)`. Other errors pass through.
func commandError(root *cobra.Command, err error) error {
	m := unknownCommand().FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	var names []string
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	msg := fmt.Sprintf("unknown command %q", m[1])
	if s := suggest(m[1], names); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	} else {
		msg += fmt.Sprintf(" (the commands: %s)", strings.Join(names, ", "))
	}
	return &usageError{msg}
}

// suggest returns the names within two edits of typed, or that it is a
// prefix of (at least two letters), nearest first.
func suggest(typed string, names []string) []string {
	var out []string
	for d := 0; d <= 2; d++ {
		for _, n := range names {
			if editDistance(strings.ToLower(typed), n) == d {
				out = append(out, n)
			}
		}
	}
	if len(out) == 0 && len(typed) >= 2 {
		for _, n := range names {
			if strings.HasPrefix(n, typed) {
				out = append(out, n)
			}
		}
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
