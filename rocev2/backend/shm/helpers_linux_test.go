package shm

import (
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// runDir returns a run directory of the test's own, mode 0700.
func runDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700))
	return dir
}

// openIn opens a backend on addr in dir; the test's cleanup closes it.
func openIn(t testing.TB, dir, addr string, cfg Config) *Backend {
	t.Helper()
	cfg.Dir = dir
	if addr != "" {
		cfg.Addr = netip.MustParseAddrPort(addr)
	}
	b, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// packet returns a minimal RoCEv2 packet of n bytes (a BTH, payload, room
// for the ICRC) whose payload starts with seq.
func packet(n int, seq byte) []byte {
	p := make([]byte, max(n, rocev2.BTHLen+rocev2.ICRCLen))
	p[0] = byte(rocev2.RCSendOnly)
	p[2], p[3] = 0xFF, 0xFF // P_Key
	for i := rocev2.BTHLen; i < len(p)-rocev2.ICRCLen; i++ {
		p[i] = seq + byte(i)
	}
	return p
}

// receiveN receives until n packets came, returning copies of them. A
// watchdog closes b should they never come, so that the test fails rather
// than hangs.
func receiveN(t testing.TB, b *Backend, n int) []backend.Incoming {
	t.Helper()
	watchdog := time.AfterFunc(30*time.Second, func() { b.Close() })
	defer watchdog.Stop()
	var out []backend.Incoming
	rx := make([]backend.Incoming, 16)
	for len(out) < n {
		k, err := b.Receive(rx)
		require.NoError(t, err, "%d of %d packets came", len(out), n)
		for _, d := range rx[:k] {
			d.Buf = append([]byte(nil), d.Buf...)
			out = append(out, d)
		}
	}
	return out
}
