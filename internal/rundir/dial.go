package rundir

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// peerUIDOf is the OS's answer to who serves a connected socket,
// replaceable by tests that cannot be another user.
var peerUIDOf = peerUID

// Dial connects to the published socket at path, after checking its
// directory (Check) and the socket file, and then who serves it: a
// process of the user's. A stale socket (nobody listens: ECONNREFUSED) is
// removed and its error returned; a missing one returns an error wrapping
// fs.ErrNotExist.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	return dialAs(ctx, path, myUID())
}

// dialAs is Dial for a reader that trusts user uid's sockets.
func dialAs(ctx context.Context, path string, uid int) (net.Conn, error) {
	if err := check(filepath.Dir(path), uid); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if err := checkSocket(path, fi, uid); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			removeIfSame(path, fi)
			return nil, fmt.Errorf("%w (a stale socket: its process is gone; removed it)", err)
		}
		return nil, err
	}
	peer, err := peerUIDOf(c.(*net.UnixConn))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	if peer != uid {
		c.Close()
		return nil, untrusted("socket", path, fmt.Sprintf("is served by uid %d, not by you (uid %d)", peer, uid), "remove it (its owner or root can)")
	}
	return c, nil
}
