//go:build !linux

package grow

// populate is not done on this system.
func populate(p, n uintptr) bool { return false }
