//go:build !linux

package grow

// populate is not done on this system.
func populate(p, n uintptr) bool { return false }

// resident is not known on this system.
func resident(p, n, page uintptr) (int, bool) { return 0, false }
