//go:build linux

package afpacket_test

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func sendmmsg(fd int, hdrs []unix.Mmsghdr) (int, error) {
	n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
