//go:build !linux

package torchsnap

// mapEvents maps nothing here: the caller allocates on the heap.
func mapEvents(n int64) ([]cev, []byte) { return nil, nil }

func unmapEvents(m []byte) {}

func discardEvents(b []byte) {}

// mapRecs maps nothing here: the caller allocates on the heap.
func mapRecs(n int) []srec { return nil }

func unmapRecs(r []srec) {}
