//go:build !linux

package plots

// The embedded fonts' pages are released only on Linux (fontpages_linux.go);
// elsewhere there is nothing to do.
