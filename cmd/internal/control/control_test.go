package control

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The control port is the device's address's own: a second server on
// another loopback address listens on the same port; one on the same
// address is told to pick another -p.
func TestListen(t *testing.T) {
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	first, err := Listen(a, 0)
	require.NoError(t, err)
	defer first.Close()
	port := first.Addr().(*net.TCPAddr).Port
	second, err := Listen(b, port)
	require.NoError(t, err, "another address, the same port")
	second.Close()
	_, err = Listen(a, port)
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.Contains(t, err.Error(), "is in use (another server on this address?): pass -p with another port on both sides")
	// A device on an IPv6 link-local address: its client may come by IPv4.
	ll, err := Listen(netip.MustParseAddr("fe80::1%lo"), 0)
	require.NoError(t, err)
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ll.Addr().(*net.TCPAddr).Port)))
	require.NoError(t, err, "an IPv4 client reaches a link-local device's control port")
	c.Close()
	ll.Close()
	_, err = Listen(netip.MustParseAddr("192.0.2.77"), 0)
	require.ErrorIs(t, err, syscall.EADDRNOTAVAIL)
	assert.Contains(t, err.Error(), "192.0.2.77 is not an address of this host")
}

func TestOpenHint(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.77")
	assert.Contains(t, OpenHint(syscall.EADDRNOTAVAIL, a, 4791), "192.0.2.77 is not an address of this host")
	assert.NotContains(t, OpenHint(syscall.EADDRNOTAVAIL, a, 4791), "UDP port")
	assert.Contains(t, OpenHint(syscall.EADDRINUSE, a, 4791), "holds UDP port 4791")
	assert.Empty(t, OpenHint(errors.New("other"), a, 4791))
}
