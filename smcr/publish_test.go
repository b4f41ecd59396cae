package smcr_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
)

// readSockets reads the process's published snapshot and returns the
// sockets whose local or peer address is on ip (other tests' sockets may
// still be closing).
func readSockets(t *testing.T, path string, ip netip.Addr) (*smcr.Published, []smcr.Socket) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := smcr.ReadPublished(ctx, path)
	require.NoError(t, err)
	var mine []smcr.Socket
	for _, s := range p.Sockets {
		if s.Local.Addr() == ip || s.Peer.Addr() == ip {
			mine = append(mine, s)
		}
	}
	return p, mine
}

// find returns the socket of role on local (a listener: role "").
func find(socks []smcr.Socket, role string, local netip.AddrPort) (smcr.Socket, bool) {
	for _, s := range socks {
		if s.Role == role && s.Local == local {
			return s, true
		}
	}
	return smcr.Socket{}, false
}

func addrPortOf(a net.Addr) netip.AddrPort {
	ap := a.(*net.TCPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// What another process reads of this one: its listener, both ends of an
// SMC-R connection with their link, buffers and counters, the close states
// as they move, and a fallback connection with its reason; closed sockets
// leave.
func TestPublishRoundTrip(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	pub, err := smcr.Publish(dir)
	require.NoError(t, err)
	defer pub.Close()
	require.Equal(t, smcr.PublishPath(dir, os.Getpid()), pub.Path())
	paths, err := smcr.PublishedPaths(dir)
	require.NoError(t, err)
	require.Equal(t, []string{pub.Path()}, paths)

	p := newPair(t, nil)
	c, s := p.dial(t)
	srvIP := addrPortOf(p.ln.Addr()).Addr()
	_, err = c.Write(make([]byte, 1000))
	require.NoError(t, err)
	_, err = io.ReadFull(s, make([]byte, 1000))
	require.NoError(t, err)

	hdr, socks := readSockets(t, pub.Path(), srvIP)
	assert.Equal(t, os.Getpid(), hdr.PID)
	assert.Equal(t, os.Getuid(), hdr.UID)
	assert.Equal(t, filepath.Base(os.Args[0]), hdr.Program)
	ln, ok := find(socks, "", addrPortOf(p.ln.Addr()))
	require.True(t, ok, "the listener: %+v", socks)
	assert.True(t, ln.Listening())
	assert.Equal(t, "configured", ln.Signalling)
	assert.Equal(t, netip.AddrPortFrom(srvIP, 4791), ln.Device)

	ci := requireMode(t, c, smcr.ModeSMCRv2)
	cs, ok := find(socks, "client", addrPortOf(c.LocalAddr()))
	require.True(t, ok, "the client: %+v", socks)
	assert.Equal(t, "ACTIVE", cs.State)
	assert.Equal(t, smcr.ModeSMCRv2, cs.Mode)
	assert.Equal(t, addrPortOf(c.RemoteAddr()), cs.Peer)
	assert.Equal(t, ci.LinkGroup, cs.LinkGroup)
	assert.Equal(t, linkIdentities(ci.Links), linkIdentities(cs.Links))
	assert.Equal(t, ci.Token, cs.Token)
	assert.Equal(t, 64<<10, cs.RMBSize)
	assert.Equal(t, 64<<10, cs.PeerRMBSize)
	assert.Equal(t, "GOROCE-TEST-UEID", cs.EID)
	assert.Equal(t, uint64(1000), cs.BytesSent)
	assert.Equal(t, netip.AddrPortFrom(p.d.LocalAddr, 4791), cs.Device)
	ss, ok := find(socks, "server", addrPortOf(s.LocalAddr()))
	require.True(t, ok, "the server: %+v", socks)
	assert.Equal(t, uint64(1000), ss.BytesReceived)
	assert.Equal(t, cs.Links[0].LocalQPN, ss.Links[0].PeerQPN)

	// The client shuts down writing: it waits for the peer
	// (PEERCLOSEWAIT1), the server has to close (APPCLOSEWAIT1).
	require.NoError(t, c.(*smcr.Conn).CloseWrite())
	waitFor(t, 10*time.Second, func() bool {
		_, socks := readSockets(t, pub.Path(), srvIP)
		cs, _ := find(socks, "client", addrPortOf(c.LocalAddr()))
		ss, _ := find(socks, "server", addrPortOf(s.LocalAddr()))
		return cs.State == "PEERCLOSEWAIT1" && cs.Shutdown == 2 && ss.State == "APPCLOSEWAIT1" && ss.Shutdown == 1
	})
	_, err = io.ReadAll(s)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, c.Close())
	waitFor(t, 10*time.Second, func() bool {
		_, socks := readSockets(t, pub.Path(), srvIP)
		return len(socks) == 1 && socks[0].Listening()
	})

	// A fallback: the client says nothing of SMC to a plain TCP server.
	tl, err := net.Listen("tcp", netip.AddrPortFrom(srvIP, 0).String())
	require.NoError(t, err)
	defer tl.Close()
	cfg := testConfig()
	cfg.PeerSpeaksSMC = false
	d := smcr.Dialer{Config: cfg, LocalAddr: p.d.LocalAddr}
	fc, err := d.DialContext(context.Background(), "tcp", tl.Addr().String())
	require.NoError(t, err)
	fs, err := tl.Accept()
	require.NoError(t, err)
	defer fs.Close()
	_, socks = readSockets(t, pub.Path(), srvIP)
	fb, ok := find(socks, "client", addrPortOf(fc.LocalAddr()))
	require.True(t, ok, "the fallback: %+v", socks)
	assert.Equal(t, smcr.ModeFallback, fb.Mode)
	assert.Equal(t, "ACTIVE", fb.State)
	assert.Equal(t, uint32(smcwire.DiagPeerNoSMC), fb.Fallback)
	assert.Equal(t, "local", fb.FallbackBy)
	assert.Empty(t, fb.Links)
	require.NoError(t, fc.Close())
	_, socks = readSockets(t, pub.Path(), srvIP)
	_, ok = find(socks, "client", addrPortOf(fc.LocalAddr()))
	assert.False(t, ok, "a closed fallback leaves")

	require.NoError(t, p.ln.Close())
	_, socks = readSockets(t, pub.Path(), srvIP)
	assert.Empty(t, socks, "a closed listener leaves")

	require.NoError(t, pub.Close())
	_, err = os.Stat(pub.Path())
	assert.ErrorIs(t, err, os.ErrNotExist, "Close removes the socket")
}

// A second publisher of the same process in the same directory is refused;
// a socket file left by a dead process with this PID is replaced.
func TestPublishTwiceAndStale(t *testing.T) {
	dir := t.TempDir()
	pub, err := smcr.Publish(dir)
	require.NoError(t, err)
	_, err = smcr.Publish(dir)
	require.ErrorContains(t, err, "already answers")
	require.NoError(t, pub.Close())

	// A stale socket: bound, never listened on, left behind.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: smcr.PublishPath(dir, os.Getpid())}))
	syscall.Close(fd)
	pub, err = smcr.Publish(dir)
	require.NoError(t, err)
	defer pub.Close()
	_, err = smcr.ReadPublished(context.Background(), pub.Path())
	require.NoError(t, err)
}

// WaitIdle returns once the last link group lingered out and the devices
// closed.
func TestWaitIdle(t *testing.T) {
	noLeaks(t)
	p := newPair(t, nil)
	c, s := p.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, smcr.WaitIdle(ctx), context.DeadlineExceeded, "a listener and a connection are open")
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())
	require.NoError(t, p.ln.Close())
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second) // hang guard only
	defer cancel()
	require.NoError(t, smcr.WaitIdle(ctx))
	require.Zero(t, smcr.OpenStacks())
}

// A peer's abort and a write after the peer closed match the errnos a
// Linux AF_SMC socket (and a fallback's TCP socket) reports.
func TestPeerAbortIsECONNRESET(t *testing.T) {
	noLeaks(t)
	p := newPair(t, nil)
	c, s := p.dial(t)
	_, err := c.Write([]byte("unread"))
	require.NoError(t, err)
	waitFor(t, 10*time.Second, func() bool { return smcr.Pending(s) == 6 })
	require.NoError(t, s.Close(), "closing with unread data aborts")
	_, err = io.ReadAll(c)
	require.ErrorIs(t, err, syscall.ECONNRESET)
}

// A run directory that others may write to is refused to the publisher
// and to PublishedPaths (smcss), with what to do; a missing one lists
// nothing.
func TestPublishRefusesUntrustedRunDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777))
	_, err := smcr.Publish(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has mode 0777")
	assert.Contains(t, err.Error(), "chmod go-w it, or set GOROCE_RUN_DIR")
	_, err = smcr.PublishedPaths(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not trusted")

	paths, err := smcr.PublishedPaths(filepath.Join(dir, "missing"))
	require.NoError(t, err)
	assert.Empty(t, paths)
}
