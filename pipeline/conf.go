package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tracer-dev/tracer/allocator"
)

// Unset is the --conf value that removes a key from the settings it applies
// over: "max_split_size_mb:none" replays as if the run had not set
// max_split_size_mb, with PyTorch's default. PyTorch has no such value (a
// key left out of the string keeps its default; -1 and 0 are refused), so
// it is tracer's, for a replay over recorded settings. Any case will do.
const Unset = "none"

// confEntries splits a conf string at its top-level commas (not those of a
// bracketed list), dropping empty entries.
func confEntries(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '[':
				depth++
			case ']':
				depth--
			}
			if s[i] != ',' || depth > 0 {
				continue
			}
		}
		if e := strings.TrimSpace(s[start:i]); e != "" {
			out = append(out, e)
		}
		start = i + 1
	}
	return out
}

func entryKey(e string) (key, value string) {
	k, v, _ := strings.Cut(e, ":")
	return strings.TrimSpace(k), strings.TrimSpace(v)
}

// applyUnsets removes the keys that conf sets to Unset from both strings.
// A key to unset that neither PyTorch nor the model knows is an error.
func applyUnsets(over, conf string) (string, string, error) {
	var unset, keep []string
	for _, e := range confEntries(conf) {
		k, v := entryKey(e)
		if !strings.EqualFold(v, Unset) {
			keep = append(keep, e)
			continue
		}
		if _, ok := modelKeys[k]; !ok && !slices.Contains(allocator.ConfKeys, k) {
			return "", "", fmt.Errorf("%s:%s: no such key to remove (PyTorch's include max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions, expandable_segments)", k, v)
		}
		unset = append(unset, k)
	}
	if len(unset) == 0 {
		return over, conf, nil
	}
	var rest []string
	for _, e := range confEntries(over) {
		if k, _ := entryKey(e); !slices.Contains(unset, k) {
			rest = append(rest, e)
		}
	}
	return strings.Join(rest, ","), strings.Join(keep, ","), nil
}

// unsetHint suggests Unset when conf gives a key -1, 0 or nothing, the
// values people try to remove a setting with.
func unsetHint(conf string) string {
	for _, e := range confEntries(conf) {
		if k, v := entryKey(e); v == "-1" || v == "0" || v == "" {
			return fmt.Sprintf(" (to remove a recorded %s, say %s:%s)", k, k, Unset)
		}
	}
	return ""
}
