//go:build linux || darwin || freebsd

package rundir

import (
	"io/fs"
	"net"
	"syscall"
)

// fileOwner returns the uid that owns the file fi describes.
func fileOwner(fi fs.FileInfo) (int, error) {
	return int(fi.Sys().(*syscall.Stat_t).Uid), nil
}

// sockopt runs get on c's file descriptor.
func sockopt(c *net.UnixConn, get func(fd int) (int, error)) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var getErr error
	if err := rc.Control(func(fd uintptr) { v, getErr = get(int(fd)) }); err != nil {
		return 0, err
	}
	return v, getErr
}
