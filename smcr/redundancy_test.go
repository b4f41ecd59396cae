package smcr_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
)

// multiPair is a pair whose sides have devs devices each (server's: the
// listening address first; client's: its source address first).
func multiPair(t testing.TB, srvDevs, cliDevs int, mod func(*smcr.Config)) *pair {
	t.Helper()
	p := newPairWith(t, func(srv, cli netip.Addr, c *smcr.Config) (server, client []netip.Addr) {
		return devicesAround(srv, srvDevs), devicesAround(cli, cliDevs)
	}, mod)
	return p
}

// devicesAround returns n loopback addresses: a, then a+2, a+4, ...
func devicesAround(a netip.Addr, n int) []netip.Addr {
	out := []netip.Addr{a}
	b := a.As4()
	for i := 1; i < n; i++ {
		b[3] += 2
		out = append(out, netip.AddrFrom4(b))
	}
	return out
}

// linksOf returns a connection's links and its group's type.
func linksOf(t testing.TB, c net.Conn) (string, []smcr.LinkInfo) {
	t.Helper()
	i, ok := smcr.Info(c)
	require.True(t, ok)
	return i.LinkGroupType, i.Links
}

// waitLinks waits until c's group has n active links.
func waitLinks(t *testing.T, c net.Conn, n int) {
	t.Helper()
	waitFor(t, 30*time.Second, func() bool {
		_, ls := linksOf(t, c)
		k := 0
		for _, l := range ls {
			if l.State == "ACTIVE" {
				k++
			}
		}
		return k == n
	})
}

// waitSymmetric waits until c's and s's group is SYMMETRIC with two
// active links (and no third one being set up or deleted).
func waitSymmetric(t *testing.T, c, s net.Conn) {
	t.Helper()
	for _, x := range []net.Conn{c, s} {
		waitFor(t, 30*time.Second, func() bool {
			typ, ls := linksOf(t, x)
			return typ == "SYMMETRIC" && len(ls) == 2 && ls[0].State == "ACTIVE" && ls[1].State == "ACTIVE"
		})
	}
}

// With two devices on each side the server adds a second link after the
// first contact, on the other devices (symmetric): both sides list two
// active links, and new connections alternate between them.
func TestSecondLinkSymmetric(t *testing.T) {
	noLeaks(t)
	p := multiPair(t, 2, 2, nil)
	c, s := p.dial(t)
	waitLinks(t, c, 2)
	waitLinks(t, s, 2)
	typ, ls := linksOf(t, c)
	require.Equal(t, "SYMMETRIC", typ)
	require.NotEqual(t, ls[0].LocalGID, ls[1].LocalGID)
	require.NotEqual(t, ls[0].PeerGID, ls[1].PeerGID)
	typ, _ = linksOf(t, s)
	require.Equal(t, "SYMMETRIC", typ)
	used := map[uint32]int{}
	for range 4 {
		c2, _ := p.dial(t)
		requireMode(t, c2, smcr.ModeSMCRv2)
		_, ls := linksOf(t, c2)
		require.True(t, ls[0].InUse)
		used[ls[0].LocalQPN]++
	}
	require.Len(t, used, 2, "connections alternate between the links: %v", used)
	require.NoError(t, transfer(t, c, s, 1<<20))
}

// With two devices on one side only, the second link shares the single
// device of the other side (Linux's asymmetric link group): the side with
// one device sees ASYMMETRIC_LOCAL, the other ASYMMETRIC_PEER, the second
// link is the asymmetric one (new connections stay on the first), and a
// connection moves to it when the first link's own device loses its
// address.
func TestSecondLinkAsymmetric(t *testing.T) {
	for _, tt := range []struct {
		name               string
		srvDevs, cliDevs   int
		srvType, cliType   string
		cutServerDeviceTwo bool
	}{
		{"server has two devices", 2, 1, "ASYMMETRIC_PEER", "ASYMMETRIC_LOCAL", false},
		{"client has two devices", 1, 2, "ASYMMETRIC_LOCAL", "ASYMMETRIC_PEER", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			paths := newPaths(t)
			p := multiPair(t, tt.srvDevs, tt.cliDevs, func(c *smcr.Config) {
				c.TestLinkInterval = 20 * time.Millisecond
				smcr.FastLinkChecks(c, time.Second, time.Hour)
				smcr.AddressesGone(c, func(a netip.Addr) bool { return !paths.isGone(a) }, 50*time.Millisecond)
			})
			c, s := p.dial(t)
			waitLinks(t, c, 2)
			waitLinks(t, s, 2)
			typ, cls := linksOf(t, c)
			require.Equal(t, tt.cliType, typ)
			styp, _ := linksOf(t, s)
			require.Equal(t, tt.srvType, styp)
			require.False(t, cls[0].Asymmetric, "the first link is not the asymmetric one")
			require.True(t, cls[1].Asymmetric)
			for range 3 {
				c2, _ := p.dial(t)
				_, ls := linksOf(t, c2)
				require.Equal(t, cls[0].LocalQPN, ls[0].LocalQPN, "new connections stay off the asymmetric link")
			}
			// Take away the address of the device that only the first link
			// uses: the two-device side's first.
			first := cls[0].LocalGID
			if tt.srvDevs == 2 {
				first = cls[0].PeerGID
			}
			done := make(chan error, 1)
			go func() { done <- transfer(t, c, s, 4<<20) }()
			paths.remove(true, first)
			require.NoError(t, <-done)
			_, ls := linksOf(t, c)
			require.Equal(t, cls[1].LocalQPN, ls[0].LocalQPN, "the connection moved to the asymmetric link")
			typ, _ = linksOf(t, c)
			require.Equal(t, "SINGLE", typ)
		})
	}
}

// With one device on each side there is no alternate path: the client
// rejects the server's ADD_LINK, and the group stays SINGLE with one link.
func TestNoAlternatePath(t *testing.T) {
	noLeaks(t)
	p := multiPair(t, 1, 1, nil)
	c, s := p.dial(t)
	waitFor(t, 30*time.Second, func() bool { return smcr.StatsOf(s.(*smcr.Conn)).LLCDropped == 0 && addLinkDone(s) })
	typ, ls := linksOf(t, c)
	require.Equal(t, "SINGLE", typ)
	require.Len(t, ls, 1)
	require.Zero(t, smcr.StatsOf(c.(*smcr.Conn)).LinksAdded)
	require.NoError(t, transfer(t, c, s, 1<<20))
}

// addLinkDone reports whether the server's first ADD_LINK of c's group
// has ended.
func addLinkDone(c net.Conn) bool { return !smcr.AddingLink(c) }
