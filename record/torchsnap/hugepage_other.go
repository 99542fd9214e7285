//go:build !linux

package torchsnap

func adviseHuge[T any](s []T) {}
