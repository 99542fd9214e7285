//go:build race

package addrmap

// raceBuild: the race detector's shadow memory faults in beside the
// program's, so tests of page faults do not hold.
const raceBuild = true
