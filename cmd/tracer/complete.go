package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/allocator"
	"github.com/tracer-dev/tracer/record"
)

// registerCompletions gives the shell completion of the flags whose values
// are names: --kind, --device, --workload, --stacks, --x, --objective, and
// the keys of --conf. Shells get it from 'tracer completion bash|zsh|fish|powershell'.
func registerCompletions(root *cobra.Command) {
	words := func(ws ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(ws, cobra.ShellCompDirectiveNoFileComp)
	}
	byCmd := map[string]map[string]cobra.CompletionFunc{
		"plot":   {"kind": words("peak", "fragmentation", "compare", "segments"), "x": words("auto", "time", "event")},
		"replay": {"device": words("sim", "cuda")},
		"tune":   {"objective": words("reserved", "fit")},
		"record": {"device": words(record.DeviceAuto, record.DeviceCUDA, record.DeviceSim), "workload": completeWorkload,
			"stacks": words(record.StackModes...)},
	}
	for _, c := range root.Commands() {
		for name, f := range byCmd[c.Name()] {
			if c.Flags().Lookup(name) == nil {
				panic(fmt.Sprintf("completion for %s --%s, which has no such flag", c.Name(), name))
			}
			c.RegisterFlagCompletionFunc(name, f)
		}
		if c.Flags().Lookup("conf") != nil {
			c.RegisterFlagCompletionFunc("conf", completeConf)
		}
	}
}

// completeWorkload offers the built-in workloads, and files.
func completeWorkload(_ *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, w := range record.Builtins() {
		out = append(out, cobra.CompletionWithDesc(w.Name, w.Description))
	}
	return out, cobra.ShellCompDirectiveDefault
}

// completeConf offers the PYTORCH_CUDA_ALLOC_CONF keys, and the model's,
// after the last comma of what is typed: "expandable_segments:True,max_"
// completes to "expandable_segments:True,max_split_size_mb:".
func completeConf(_ *cobra.Command, _ []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
	head := ""
	if i := strings.LastIndex(typed, ","); i >= 0 {
		head = typed[:i+1]
	}
	keys := append([]string{"tracer_round", "tracer_small_size", "tracer_small_segment", "tracer_min_large_alloc", "tracer_large_rounding"},
		allocator.ConfKeys...)
	sort.Strings(keys)
	var out []cobra.Completion
	for _, k := range keys {
		if strings.HasPrefix(k, typed[len(head):]) {
			out = append(out, head+k+":")
		}
	}
	return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
}
