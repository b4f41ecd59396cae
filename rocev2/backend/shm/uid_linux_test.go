package shm_test

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/shm"
)

// nobody is the user the other process runs as.
const nobody = 65534

// copyTestBinary copies the test binary where another user can run it.
func copyTestBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	src, err := os.Open(os.Args[0])
	require.NoError(t, err)
	defer src.Close()
	reachable(t, dir)
	bin := filepath.Join(dir, "shm.test")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	return bin
}

// reachable lets other users through the directories above dir (t.TempDir
// makes them 0700).
func reachable(t *testing.T, dir string) {
	t.Helper()
	for d := filepath.Dir(dir); d != "/" && d != filepath.Clean(os.TempDir()); d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o711))
	}
}

// A process of another user is never paired with: not when we dial its
// socket (SO_PEERCRED of the socket's owner), not when it dials ours (of
// the process that connected).
func TestOtherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run a child as another user")
	}
	bin := copyTestBinary(t)
	asNobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}

	t.Run("we dial theirs", func(t *testing.T) {
		dir := t.TempDir()
		reachable(t, dir)
		require.NoError(t, os.Chown(dir, nobody, nobody))
		require.NoError(t, os.Chmod(dir, 0o700))
		c := startChild(t, "listen", dir, asNobody, bin)
		c.line(t, "READY")
		be := openShm(t, dir, parentAddr, shm.Config{NoListen: true})
		t.Cleanup(func() { be.Close() })
		peer := netip.MustParseAddrPort(childAddr)
		require.NoError(t, be.Send([]backend.Outgoing{{Buf: make([]byte, 64), Dst: peer}}))
		eventually(t, "the dial ends", func() bool { return be.LinkTo(peer) != shm.LinkConnecting })
		assert.Equal(t, shm.LinkNone, be.LinkTo(peer))
		s := be.Stats()
		assert.EqualValues(t, 1, s.RefusedPeers, "%+v", s)
		assert.Zero(t, s.Pairings)
	})

	t.Run("they dial ours", func(t *testing.T) {
		dir := runDir(t)
		be := openShm(t, dir, parentAddr, shm.Config{})
		t.Cleanup(func() { be.Close() })
		// Let the other user reach the socket (Open checked the directory
		// before it listened): only SO_PEERCRED stands in its way now.
		reachable(t, dir)
		require.NoError(t, os.Chmod(dir, 0o711))
		require.NoError(t, os.Chmod(be.SocketPath(), 0o777))
		c := startChild(t, "dial", dir, asNobody, bin)
		link := c.line(t, "LINK ")
		assert.True(t, strings.HasPrefix(link, "LINK none"), link)
		eventually(t, "the refusal is counted", func() bool { return be.Stats().RefusedPeers > 0 })
		s := be.Stats()
		assert.EqualValues(t, 1, s.RefusedPeers, "%+v", s)
		assert.Zero(t, s.Pairings)
	})
}
