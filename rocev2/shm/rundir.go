package shm

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// DefaultDir is the run directory when Config.Dir is empty: $GOROCE_RUN_DIR,
// else goroce-UID in the system's temporary directory (where devices
// publish their counters too, device.RunDir).
func DefaultDir() string {
	if d := os.Getenv("GOROCE_RUN_DIR"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("goroce-%d", os.Getuid()))
}

// SocketPath is the rendezvous socket of the device at ap in dir: a
// backend listens there, and a sender finds its peer there by the
// destination of its packets.
func SocketPath(dir string, ap netip.AddrPort) string {
	return filepath.Join(dir, fmt.Sprintf("%s_%d.shm", ap.Addr().Unmap(), ap.Port()))
}
