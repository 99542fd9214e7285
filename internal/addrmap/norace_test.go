//go:build !race

package addrmap

const raceBuild = false
