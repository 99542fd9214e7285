package trace

// SetWriteVersion makes writers stamp v until the returned func is called.
func SetWriteVersion(v Version) (restore func()) {
	old := writeVersion
	writeVersion = v
	return func() { writeVersion = old }
}
