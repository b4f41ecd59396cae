//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "smcguest: runs on Linux only (it runs inside the interop harness's Linux guest, over netlink and AF_SMC)")
	os.Exit(2)
}
