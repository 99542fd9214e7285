package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/trace"
)

type exportOptions struct {
	Path     string
	Out      string
	JSON     bool
	Stdout   io.Writer
	Stderr   io.Writer
	outGiven bool
}

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return newExportCmd(nil) })
}

func newExportCmd(runF func(context.Context, *exportOptions) error) *cobra.Command {
	opts := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export [TRACE] [-o OUT.parquet]",
		Short: "Write a trace as a Parquet table, for SQL (DuckDB, Spark, pandas)",
		Long: `Export writes a trace as one flat Parquet table: one row per event, the
trace's columns plus, for SQL without joins on addresses:

  alloc_seq   on alloc rows the row's own seq; on free_requested and
              free_completed rows the seq of the alloc of the block freed
              (null where the alloc is not in the trace)
  stack_id    the event's stack in the trace's stack table (null: none)
  frame_name, frame_file, frame_line
              the stack's innermost frame (line null when unknown)
  stack_text  the whole stack, one "name<TAB>file<TAB>line" a line,
              innermost first

DuckDB and most tools read Parquet with nothing to install (Arrow IPC needs a
DuckDB extension). The trace's metadata (tracer.alloc_conf, ...) is the file's
key/value metadata. Without TRACE, the built-in sample is exported. The output
is written whole or not at all, and never over the trace.`,
		Example: `  tracer export run.arrows                    # writes run.parquet
  tracer export run.arrows -o /tmp/run.parquet

  # Live bytes at the end of the run by file:line, in DuckDB
  duckdb -c "SELECT frame_file || ':' || frame_line AS site, sum(size_bytes) AS live_bytes
             FROM 'run.parquet' a WHERE action = 'alloc' AND NOT EXISTS
               (SELECT 1 FROM 'run.parquet' f WHERE f.action = 'free_requested' AND f.alloc_seq = a.seq)
             GROUP BY site ORDER BY live_bytes DESC LIMIT 10"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("export takes one TRACE and writes it to -o OUT.parquet (got %d arguments)", len(args))
			}
			if len(args) == 1 && strings.EqualFold(filepath.Ext(args[0]), ".parquet") {
				return usagef("%s is the output: put it after -o, as in: tracer export TRACE -o %s", args[0], args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Path = args[0]
			}
			opts.Stdout, opts.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			opts.outGiven = cmd.Flags().Changed("output")
			if opts.outGiven && opts.Out == "" {
				return usagef("-o: want a file name (or - for standard output)")
			}
			if runF == nil {
				runF = runExport
			}
			return runF(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Out, "output", "o", "", "output Parquet file (- for stdout); default: TRACE with .parquet")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print what was written as JSON")
	return cmd
}

// exportJSON is the --json report of tracer export.
type exportJSON struct {
	Trace       string `json:"trace"`
	Output      string `json:"output"`
	Rows        int64  `json:"rows"`
	RowGroups   int    `json:"row_groups"`
	PairedFrees int64  `json:"paired_frees"`
}

func runExport(ctx context.Context, opts *exportOptions) error {
	in, err := pipeline.Open(opts.Path)
	if err != nil {
		return err
	}
	out := opts.Out
	if out == "" {
		base := in.Name
		if in.Sample {
			base = filepath.Base(in.Meta.SourceFile)
		}
		out = strings.TrimSuffix(base, filepath.Ext(base)) + ".parquet"
	}
	if err := outfile.Check(out, opts.Path); err != nil {
		return err
	}
	rd, err := in.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	f, err := outfile.Create(out)
	if err != nil {
		return err
	}
	defer f.Abort() // no-op after Commit
	bw := bufio.NewWriterSize(f.File(), 1<<20)
	st, err := trace.WriteParquet(ctx, bw, rd)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Commit()
	}
	if err != nil {
		if ctx.Err() != nil || rd.Err() != nil {
			return err // the reader's errors name the trace
		}
		return fmt.Errorf("%s: %w", out, err)
	}
	if rd.Truncated() {
		fmt.Fprintf(opts.Stderr, "warning: %s ends without its end-of-stream marker (a killed recording?): exported the %d events of its whole batches\n", in.Name, st.Rows)
	}
	say := opts.Stdout
	if out == outfile.Stdout {
		say = opts.Stderr // the table itself goes to stdout
	}
	if opts.JSON {
		enc := json.NewEncoder(say)
		enc.SetIndent("", "  ")
		return enc.Encode(exportJSON{Trace: in.Name, Output: out, Rows: st.Rows, RowGroups: st.RowGroups, PairedFrees: st.Paired})
	}
	fmt.Fprintf(say, "%s: %s in %s\n", out, plural(int(st.Rows), "row"), plural(st.RowGroups, "row group"))
	return nil
}
