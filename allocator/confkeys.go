package allocator

// ConfKeys are the PYTORCH_CUDA_ALLOC_CONF keys ParseConf takes (PyTorch
// 2.11's), aliases included: for shell completion and for messages.
var ConfKeys = []string{
	"backend", "expandable_segments", "garbage_collection_threshold", "graph_capture_record_stream_reuse",
	"large_segment_size_mb", "max_non_split_rounding_mb", "max_split_size_mb", "per_process_memory_fraction",
	"pinned_num_register_threads", "pinned_reserve_segment_size_mb", "pinned_use_background_threads",
	"pinned_use_cuda_host_register", "pinned_use_hip_host_register", "release_lock_on_cudamalloc",
	"release_lock_on_hipmalloc", "roundup_power2_divisions",
}
