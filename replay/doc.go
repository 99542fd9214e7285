// Package replay feeds a trace's request stream to the caching-allocator
// model (package allocator) and reports every replayed event.
//
// Run reads trace.Events from a Source (a trace.Reader or a SliceSource; a
// BatchSource, such as SliceSource, hands them over a batch at a time, which
// spares a call and a copy per event), keeps one allocator per device, and
// turns the recording back into requests:
//
//   - alloc → Malloc(requested size, stream);
//   - free_requested immediately followed by free_completed at the same
//     address → a synchronous Free;
//   - free_requested alone → the block had record_stream users: a pending
//     Free, completed where the recording's free_completed appears, or,
//     where segment releases and then an alloc (or oom) follow it, within
//     that malloc, after its search (allocator CompleteLate): a retry's
//     synchronize completed it, and PyTorch records that before the alloc;
//   - oom → a Malloc of the recorded (rounded) size that is expected to fail;
//     if it succeeds under other settings it is freed at once and counted;
//   - segment_free/segment_unmap that no malloc of the model explains → the
//     user's torch.cuda.empty_cache();
//   - leading FlagReconstructed events (wrapped histories) → Restore.
//
// Recorded blocks are tracked by recorded address → replayed address (and
// the allocator's Handle, so that a free needs no second address lookup), so
// a replay under other settings frees the right blocks. With Options.Recorded
// the trace is taken to have been recorded under Options.Conf: the recorded
// segment addresses are planned into the SimDevice so every block lands at
// its recorded address, and every replayed event is compared with the
// recorded one; differences are reported as Mismatches.
package replay
