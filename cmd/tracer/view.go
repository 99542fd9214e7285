package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/tracer-dev/tracer/internal/outfile"
	"github.com/tracer-dev/tracer/pipeline"
	"github.com/tracer-dev/tracer/view"
)

type viewOptions struct {
	Paths  []string
	HTTP   string
	Open   bool
	Output string
	Confs  []string
	Rounds []int64
	Time   bool
	Out    io.Writer
	Err    io.Writer
	// ready, when set, receives the URL once the server listens (tests).
	ready func(url string)
}

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return newViewCmd(nil) })
}

func newViewCmd(runF func(context.Context, *viewOptions) error) *cobra.Command {
	opts := &viewOptions{}
	cmd := &cobra.Command{
		Use:   "view [TRACE...] [--http ADDR] [--open] [-o report.html] [--conf STR]... [--round N]...",
		Short: "Explore traces in the browser: timeline, segments, sites at any moment",
		Long: `View serves an interactive view of the traces on a local web server, as
'go tool pprof -http' does, and prints its URL (--open also opens a browser).
The timeline shows allocated, reserved, active and requested bytes by event
(--time: by time); drag to pan, wheel to zoom down to single events. Click a moment to see the segments
and their blocks there (allocated, pending free, free beside live blocks,
empty), live memory by allocation site as an icicle, and the largest blocks
with their size, stack, allocation time and lifetime; hover a block for its
whole stack. OOMs, the program's empty_cache calls and the peaks are marked.

Several TRACEs (one per rank, say) are drawn together; each --conf or --round
adds a replay of the first TRACE under those settings, named in the legend.
With -o, view writes one self-contained HTML file instead (no network needed
to open it): its timeline zooms to 4096 columns (to single events around the
marks), and a click shows the nearest of the moments it saved.

Without TRACE, the built-in sample is viewed. Stop the server with Ctrl-C.`,
		Example: `  tracer view                                        # the built-in sample
  tracer view run.arrows --open
  tracer view run.arrows --http :8080                # on port 8080, all interfaces
  tracer view run.arrows --conf expandable_segments:True --round 4096
  tracer view rank0.arrows rank1.arrows rank2.arrows
  tracer view run.arrows -o report.html              # attach it to a bug report`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Paths = args
			opts.Out, opts.Err = cmd.OutOrStdout(), cmd.ErrOrStderr()
			if opts.Output != "" && (cmd.Flags().Changed("http") || opts.Open) {
				return usagef("-o writes a report file; --http and --open serve the view: pick one")
			}
			for _, r := range opts.Rounds {
				if r <= 0 || r&(r-1) != 0 {
					return usagef("--round %d: the rounding quantum must be a power of two (512 is PyTorch's)", r)
				}
			}
			if runF == nil {
				runF = runView
			}
			return runF(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.HTTP, "http", "localhost:0", "address to serve on (host:port; :PORT for all interfaces; port 0 picks a free one)")
	f.BoolVar(&opts.Open, "open", false, "open the view in the default browser")
	f.StringVarP(&opts.Output, "output", "o", "", "write a self-contained HTML report to this file instead of serving")
	f.BoolVar(&opts.Time, "time", false, "time on the x axis instead of the event index (when every trace is timed)")
	f.StringArrayVar(&opts.Confs, "conf", nil, "also draw a replay of the first TRACE under these PYTORCH_CUDA_ALLOC_CONF keys (repeatable)")
	f.Int64SliceVar(&opts.Rounds, "round", nil, "also draw a replay of the first TRACE with this rounding quantum in bytes (repeatable)")
	return cmd
}

func runView(ctx context.Context, opts *viewOptions) error {
	if opts.Output != "" {
		if err := outfile.Check(opts.Output, opts.Paths...); err != nil {
			return err
		}
	}
	vopt := view.Options{Paths: opts.Paths, Time: opts.Time, Warn: warnTo(opts.Err)}
	for _, c := range opts.Confs {
		vopt.Replays = append(vopt.Replays, pipeline.Settings{Conf: c})
	}
	for _, r := range opts.Rounds {
		vopt.Replays = append(vopt.Replays, pipeline.Settings{Round: r})
	}
	start := time.Now()
	v, err := view.Load(ctx, vopt)
	if err != nil {
		return err
	}
	// Loading left garbage about the size of the view (the slices it
	// grew); the server may run for hours: give it back now.
	debug.FreeOSMemory()
	if opts.Output != "" {
		return writeReport(ctx, v, opts)
	}
	ln, err := net.Listen("tcp", opts.HTTP)
	if err != nil {
		return usagef("--http %s: %v", opts.HTTP, err)
	}
	url := "http://" + urlHost(ln.Addr().String()) + "/"
	fmt.Fprintf(opts.Out, "tracer view: %s (loaded in %.1f s; Ctrl-C stops)\n", url, time.Since(start).Seconds())
	srv := &http.Server{Handler: v.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if opts.ready != nil {
		opts.ready(url)
	}
	if opts.Open {
		if err := openBrowser(url); err != nil {
			fmt.Fprintf(opts.Err, "tracer: could not open a browser (%v); open %s yourself\n", err, url)
		}
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		return context.Cause(ctx)
	}
}

func writeReport(ctx context.Context, v *view.View, opts *viewOptions) error {
	f, err := outfile.Create(opts.Output)
	if err != nil {
		return err
	}
	defer f.Abort() // no-op after Commit
	cw := &countWriter{w: f.File()}
	if err := v.WriteReport(ctx, cw); err != nil {
		return fmt.Errorf("%s: %w", opts.Output, err)
	}
	if err := f.Commit(); err != nil {
		return err
	}
	fmt.Fprintf(opts.Out, "wrote %s (%.1f MiB): open it in a browser, no network needed\n", opts.Output, float64(cw.n)/(1<<20))
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// urlHost makes a listener's address browsable: an unspecified host (all
// interfaces) is reached as localhost.
func urlHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return errors.New(strings.TrimSpace(err.Error()))
	}
	go cmd.Wait()
	return nil
}
