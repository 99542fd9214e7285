//go:build !unix

package record

import "time"

// cpuTime is not measured on this system.
func cpuTime() time.Duration { return 0 }

// threadCPUTime is not measured on this system.
func threadCPUTime() time.Duration { return 0 }
