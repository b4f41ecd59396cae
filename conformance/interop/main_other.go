//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "interop: runs on Linux only (it boots Linux guests under QEMU in network namespaces)")
	os.Exit(2)
}
