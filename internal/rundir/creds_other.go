//go:build !linux && !darwin && !freebsd

package rundir

import (
	"errors"
	"io/fs"
	"net"
	"runtime"
)

// errNoCreds is why a platform shares nothing through the run directory:
// without knowing who owns a directory or serves a socket, a reader could
// not tell another user's fake from the real thing.
var errNoCreds = errors.New("goroce cannot tell who owns a file or serves a socket on " + runtime.GOOS +
	", so it shares nothing through the run directory (counters and SMC sockets stay in their process)")

func peerUID(*net.UnixConn) (int, error) { return 0, errNoCreds }

func fileOwner(fs.FileInfo) (int, error) { return 0, errNoCreds }
