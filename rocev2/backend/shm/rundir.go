package shm

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/goroce/goroce/internal/rundir"
)

// DefaultDir is the run directory when Config.Dir is empty: goroce's one
// (internal/rundir: $GOROCE_RUN_DIR, $XDG_RUNTIME_DIR/goroce, or
// goroce-UID in the system's temporary directory), where devices publish
// their counters too.
func DefaultDir() string { return rundir.Path() }

// SocketPath is the rendezvous socket of the device at ap in dir: a
// backend listens there, and a sender finds its peer there by the
// destination of its packets.
func SocketPath(dir string, ap netip.AddrPort) string {
	return filepath.Join(dir, fmt.Sprintf("%s_%d.shm", ap.Addr().Unmap(), ap.Port()))
}
