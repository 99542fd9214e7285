//go:build !race

package record

const raceBuild = false
