//go:build !linux

package grow

// mapAnon maps nothing on this system: MakeOff makes its arrays on the heap.
func mapAnon(size uintptr) ([]byte, bool) { return nil, false }

func unmap(m []byte) {}
