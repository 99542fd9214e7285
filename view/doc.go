// Package view serves tracer's interactive view of traces in a browser, and
// writes it as one self-contained HTML report.
//
// Load reads the traces (and replays of the first under other settings)
// into memory, one device each, and indexes every trace in one pass of an
// analysis.Summarizer:
//
//   - a pyramid of min/max spans of the byte series (allocated, reserved,
//     active, requested) over 16, 64, 256, … events, so that any range
//     reduces to per-pixel-column minima and maxima in O(columns · levels),
//     and a peak is never lost however far out the view is zoomed;
//   - analysis.States every so many events (at least 16 Ki events apart,
//     fewer when they would pass 256 MiB), from which analysis.Resume
//     rebuilds the exact state at any event by feeding the events between:
//     the segments and blocks of a clicked moment, and the per-event values
//     when the view is zoomed in to single events;
//   - for each alloc, the event of its free (the blocks' lifetimes), and the
//     marks: OOMs with why they failed, the user's empty_cache calls, the
//     allocated and reserved peaks, and record_function phases once traces
//     carry them (Trace.phases is the hook).
//
// The events themselves (48 bytes each) go to an unlinked temporary file
// that is mapped once loaded (eventStore): they live in the page cache, not
// the heap, which holds about 15 bytes per event (the pyramid, each
// alloc's free) plus the resume states. The page (assets/) is plain HTML, CSS and JavaScript drawing on a
// canvas, embedded in the binary: no network, no build step. The server's
// endpoints are listed at View.Handler; a report embeds each trace's
// timeline at 4096 columns, every event around its first marks, and its
// state at its marks and 40 moments.
package view
