//go:build !unix

package cputime

import "time"

// Process is not measured on this system.
func Process() time.Duration { return 0 }

// Thread is not measured on this system.
func Thread() time.Duration { return 0 }

// ThreadFaults is not measured on this system.
func ThreadFaults() int64 { return 0 }
