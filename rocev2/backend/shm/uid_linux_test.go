package shm_test

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
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

// A process of a user named in Config.AllowUIDs pairs, as the field's
// documentation says it is set up: the listener admits the other user and
// its directory lets it through (0711); the other user's process opens on
// the same directory with NoListen, admitting the listener's user, and
// dials. Packets then go over the rings both ways, each side ringing the
// other's doorbell the ordinary way (not raw: another user's).
func TestOtherUserAdmitted(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run a child as another user")
	}
	bin := copyTestBinary(t)
	asNobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	dir := runDir(t)
	be := openShm(t, dir, parentAddr, shm.Config{AllowUIDs: []uint32{nobody}})
	t.Cleanup(func() { be.Close() })
	reachable(t, dir)
	require.NoError(t, os.Chmod(dir, 0o711))

	c := startChild(t, "admitted", dir, asNobody, bin)
	assert.Equal(t, "LINK "+shm.LinkShm, c.line(t, "LINK "), "the child's link to us")

	// The child's packet, over the rings.
	want := make([]byte, 256)
	fill(want, 1)
	got := receiveOne(t, be)
	assert.Equal(t, netip.MustParseAddrPort(childAddr), got.Src)
	require.Len(t, got.Buf, len(want))
	icrc := len(want) - rocev2.ICRCLen // Send seals the ICRC in its last bytes
	assert.True(t, bytes.Equal(want[:icrc], got.Buf[:icrc]), "the child's packet, byte-exact")
	assert.Equal(t, backend.ICRCOK, got.ICRC, "the ICRC the child sealed, verified")
	assert.Equal(t, shm.LinkShm, be.LinkTo(netip.MustParseAddrPort(childAddr)), "our link to the child")

	// Ours to it, on the same pairing.
	out := make([]byte, 512)
	fill(out, 2)
	sum := crc32.ChecksumIEEE(out[:len(out)-rocev2.ICRCLen])
	require.NoError(t, be.Send([]backend.Outgoing{{Buf: out, Dst: netip.MustParseAddrPort(childAddr)}}))
	assert.Equal(t, fmt.Sprintf("GOT %d %d %v", len(out), sum, backend.ICRCOK), c.line(t, "GOT "))

	s := be.Stats()
	assert.EqualValues(t, 1, s.Pairings, "%+v", s)
	assert.Zero(t, s.RefusedPeers, "%+v", s)
}

// childAdmitted is TestOtherUserAdmitted's other user: it dials the parent
// with a packet, says which link it got, and reports the packet it
// receives back.
func childAdmitted(t *testing.T, dir string, in *bufio.Scanner) {
	be := openShm(t, dir, childAddr, shm.Config{NoListen: true, AllowUIDs: []uint32{0}})
	defer be.Close()
	parent := netip.MustParseAddrPort(parentAddr)
	p := make([]byte, 256)
	fill(p, 1)
	require.NoError(t, be.Send([]backend.Outgoing{{Buf: p, Dst: parent}}))
	eventually(t, "the dial ends", func() bool { return be.LinkTo(parent) != shm.LinkConnecting })
	fmt.Printf("LINK %s\n", be.LinkTo(parent))
	d := receiveOne(t, be)
	fmt.Printf("GOT %d %d %v\n", len(d.Buf), crc32.ChecksumIEEE(d.Buf[:max(len(d.Buf)-rocev2.ICRCLen, 0)]), d.ICRC)
	for in.Scan() {
	}
}

// receiveOne receives one packet and returns a copy of it; a watchdog
// closes b should none come, so that the test fails rather than hangs.
func receiveOne(t testing.TB, b *shm.Backend) backend.Incoming {
	t.Helper()
	watchdog := time.AfterFunc(hangGuard, func() { b.Close() })
	defer watchdog.Stop()
	rx := make([]backend.Incoming, 4)
	n, err := b.Receive(rx)
	require.NoError(t, err, "no packet came")
	require.Equal(t, 1, n)
	d := rx[0]
	d.Buf = bytes.Clone(d.Buf)
	return d
}
