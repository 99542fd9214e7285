//go:build !linux

package grow

func adviseHuge(p, n uintptr) {}
