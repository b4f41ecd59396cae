//go:build darwin || freebsd

package rundir

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerUID returns the effective uid of the process at the other end of c
// when it connected or listened (LOCAL_PEERCRED).
func peerUID(c *net.UnixConn) (int, error) {
	return sockopt(c, func(fd int) (int, error) {
		cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if err != nil {
			return 0, err
		}
		return int(cred.Uid), nil
	})
}
