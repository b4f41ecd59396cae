package rundir

import (
	"net"
	"syscall"
)

// peerUID returns the effective uid of the process at the other end of c
// when it connected or listened (SO_PEERCRED).
func peerUID(c *net.UnixConn) (int, error) {
	return sockopt(c, func(fd int) (int, error) {
		cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if err != nil {
			return 0, err
		}
		return int(cred.Uid), nil
	})
}
