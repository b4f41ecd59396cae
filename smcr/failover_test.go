package smcr_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/smcr"
)

// backends are the two networks the failover tests run on.
var backends = []struct {
	name string
	mem  bool
}{{"memlink", true}, {"udp", false}}

// pathsGone says whether a test on backend mem takes a path away by its
// devices' addresses (their sends fail at once) rather than silently
// (found by TEST_LINK): UDP's, as a deleted address fails a socket's
// sends.
func pathsGone(mem bool) bool { return !mem }

// dialTwoLinks dials a connection and waits until both sides' group has
// its two links.
func (lp *linkPair) dialTwoLinks(t *testing.T) (c, s net.Conn) {
	t.Helper()
	c, s = lp.dial(t)
	waitLinks(t, c, 2)
	waitLinks(t, s, 2)
	return c, s
}

// takeAway takes the devices at addrs away (or, with false, gives them
// back) as pathsGone says for the pair's backend.
func (lp *linkPair) takeAway(on bool, addrs ...netip.Addr) {
	if pathsGone(lp.mem) {
		lp.paths.remove(on, addrs...)
	} else {
		lp.paths.cut(on, addrs...)
	}
}

// requireTransferred waits (a hang guard only) for a transfer running in
// the background to end, and requires it to have succeeded.
func requireTransferred(t *testing.T, done <-chan error, limit time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(limit):
		t.Fatal("the transfer did not end")
	}
}

// pathOf returns the path (0 or 1) of the link c sends on, by its local
// device, or -1 while c is between links: its link was taken out of the
// group and the move to the other one has not finished.
func (lp *linkPair) pathOf(t testing.TB, c net.Conn) int {
	t.Helper()
	_, ls := linksOf(t, c)
	if len(ls) == 0 || !ls[0].InUse {
		return -1
	}
	for i := range 2 {
		if ls[0].Device.Addr() == lp.srv[i] || ls[0].Device.Addr() == lp.cli[i] {
			return i
		}
	}
	t.Fatalf("link on device %v is on no path of the pair", ls[0].Device)
	return -1
}

// connLink is pathOf for a connection that must be on a link now.
func (lp *linkPair) connLink(t testing.TB, c net.Conn) int {
	t.Helper()
	i := lp.pathOf(t, c)
	require.NotEqual(t, -1, i, "the connection is on no link of its group")
	return i
}

// movedOff waits until c sends on the path other than i.
func (lp *linkPair) movedOff(t *testing.T, c net.Conn, i int) {
	t.Helper()
	waitFor(t, 30*time.Second, func() bool { return lp.pathOf(t, c) == 1-i })
}

// When the path of a connection's link is cut in the middle of a transfer
// (both ways at once), at any point of a CDC and its WRITE, and whichever
// side's WRITE it catches, the link goes down, the connection moves to the
// other link, and every byte arrives exactly once: the transfer completes
// byte-exact, over SMC-R. Over memlink the cut is silent (TEST_LINK finds
// it); over UDP the devices also lose their addresses at the cut (their
// next sends fail), so that both ways of going down meet every point.
func TestFailoverAtEveryCutPoint(t *testing.T) {
	for _, be := range backends {
		for _, point := range []cutPoint{beforeWrite, betweenWriteAndCDC, afterCDC} {
			for _, writer := range []string{"client", "server"} {
				t.Run(fmt.Sprintf("%s/%s writes/%v", be.name, writer, point), func(t *testing.T) {
					noLeaks(t)
					lp := newLinkPair(t, be.mem, nil)
					c, s := lp.dialTwoLinks(t)
					i := lp.connLink(t, c)
					w, peer := lp.cli[i], lp.srv[i]
					if writer == "server" {
						w, peer = peer, w
					}
					tr := newTrigger(w, peer, 20, point, pathsGone(lp.mem))
					lp.paths.trig.Store(tr)
					require.NoError(t, transfer(t, c, s, 4<<20))
					select {
					case <-tr.firedC:
					default:
						t.Fatal("the cut never came: the test proved nothing")
					}
					requireMode(t, c, smcr.ModeSMCRv2)
					require.Equal(t, 1-i, lp.connLink(t, c), "the connection moved to the other link")
					require.Equal(t, 1-i, lp.connLink(t, s))
					require.NotZero(t, smcr.StatsOf(c.(*smcr.Conn)).ConnsMoved+smcr.StatsOf(s.(*smcr.Conn)).ConnsMoved)
				})
			}
		}
	}
}

// When both paths are cut (silently over memlink, by the devices'
// addresses over UDP), the last link's failure ends the connections:
// blocked Reads and Writes return errors (not an orderly end) in bounded
// time, and every goroutine stops.
func TestBothLinksCut(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			noLeaks(t)
			lp := newLinkPair(t, be.mem, nil)
			c, s := lp.dialTwoLinks(t)
			requireDeadEnds(t, c, s, func() { lp.takeAway(true, append(lp.path(0), lp.path(1)...)...) })
			c.Close()
			s.Close()
		})
	}
}

// A path that fails and comes back again and again under a transfer (a
// silent cut over memlink, the devices' addresses over UDP): each time the
// connection moves off the dead link, the group adds a link again once the
// path is back, and the next cut catches the connection there. The stream
// stays byte-exact throughout.
func TestLinkFlapping(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			noLeaks(t)
			lp := newLinkPair(t, be.mem, nil)
			c, s := lp.dialTwoLinks(t)
			done := make(chan error, 1)
			go func() { done <- transfer(t, c, s, 32<<20) }()
			moves := 0
			for range 3 {
				i := lp.connLink(t, c)
				lp.takeAway(true, lp.path(i)...)
				lp.movedOff(t, c, i)
				moves++
				lp.takeAway(false, lp.path(i)...)
				// Both paths again (an asymmetric link added while the
				// path was gone is replaced): the next cut leaves one.
				waitSymmetric(t, c, s)
			}
			requireTransferred(t, done, 120*time.Second)
			require.Equal(t, 3, moves)
			requireMode(t, c, smcr.ModeSMCRv2)
			require.GreaterOrEqual(t, smcr.StatsOf(c.(*smcr.Conn)).LinksAdded, uint64(4), "the link came back each time")
		})
	}
}

// When the path of a connection's link goes while only the client's
// device has lost its address, the server's new link (on its own device
// of that path, which still works) can only land on the client's
// surviving device: an asymmetric group (the client's two links share its
// device). When the client's address is back, the client asks for a link,
// the server adds a symmetric one on the path that came back and deletes
// the asymmetric link (NO_ASYM_NEEDED): the group is symmetric again, so
// that losing the other path later does not end it. The stream stays
// byte-exact throughout, and the replaced link is not counted as failed.
func TestAsymmetricLinkReplaced(t *testing.T) {
	noLeaks(t)
	lp := newLinkPair(t, false, nil)
	c, s := lp.dialTwoLinks(t)
	i := lp.connLink(t, c)
	done := make(chan error, 1)
	go func() { done <- transfer(t, c, s, 16<<20) }()
	lp.paths.remove(true, lp.cli[i])
	lp.movedOff(t, c, i)
	waitFor(t, 30*time.Second, func() bool {
		ct, _ := linksOf(t, c)
		st, _ := linksOf(t, s)
		return ct == "ASYMMETRIC_LOCAL" && st == "ASYMMETRIC_PEER"
	})
	failed := smcr.StatsOf(c.(*smcr.Conn)).LinksFailed + smcr.StatsOf(s.(*smcr.Conn)).LinksFailed

	lp.paths.remove(false, lp.cli[i])
	waitSymmetric(t, c, s)
	_, ls := linksOf(t, c)
	require.NotEqual(t, ls[0].Device, ls[1].Device, "the client's two links are on its two devices")
	_, ls = linksOf(t, s)
	require.NotEqual(t, ls[0].Device, ls[1].Device, "the server's two links are on its two devices")
	require.Equal(t, failed, smcr.StatsOf(c.(*smcr.Conn)).LinksFailed+smcr.StatsOf(s.(*smcr.Conn)).LinksFailed,
		"the replaced asymmetric link is not a failure")
	requireTransferred(t, done, 60*time.Second)

	// A path goes now: a new connection of the group on it moves to the
	// other path, and the group lives on.
	c2, s2 := lp.dial(t)
	j := lp.connLink(t, c2)
	lp.paths.remove(true, lp.path(j)...)
	go func() { done <- transfer(t, c2, s2, 4<<20) }()
	lp.movedOff(t, c2, j)
	requireTransferred(t, done, 60*time.Second)
	requireMode(t, c2, smcr.ModeSMCRv2)
}

// 200 connections on one link group, half on each link (they alternate),
// each echoing its own stream: when one path's devices lose their
// addresses in the middle, its hundred connections move to the other link
// at once, and every stream arrives byte-exact. (The devices' send errors
// take the link down: with 400 busy goroutines on the test's CPUs,
// TEST_LINK's wait could be a starved receive goroutine's, not a dead
// path's.)
func TestManyConnectionsMoveAtOnce(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			noLeaks(t)
			lp := newLinkPair(t, be.mem, func(c *smcr.Config) { c.TestLinkInterval = -1 })
			first, firstS := lp.dial(t)
			waitLinks(t, first, 2)
			const conns = 200
			cs, ss := []net.Conn{first}, []net.Conn{firstS}
			for len(cs) < conns {
				c, s := lp.dial(t)
				cs, ss = append(cs, c), append(ss, s)
			}
			onPath := [2]int{}
			for _, c := range cs {
				onPath[lp.connLink(t, c)]++
			}
			require.InDelta(t, conns/2, onPath[0], 2, "connections alternate between the links: %v", onPath)
			var wg sync.WaitGroup
			errs := make(chan error, conns)
			started := make(chan struct{}, conns)
			var finished [conns]atomic.Bool
			for k := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- echoStream(cs[k], ss[k], 1<<20, k, started)
					finished[k].Store(true)
				}()
			}
			for range conns {
				<-started // every stream has data on the wire
			}
			lp.paths.remove(true, lp.path(0)...)
			waitOr(t, &wg, 120*time.Second, func() {
				for k := range cs {
					if !finished[k].Load() {
						t.Logf("stream %d unfinished:\n c: %s\n s: %s", k, smcr.DebugState(cs[k]), smcr.DebugState(ss[k]))
					}
				}
			})
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for _, c := range cs {
				require.Equal(t, 1, lp.connLink(t, c), "every connection is on the surviving link")
			}
		})
	}
}

// echoStream has s echo c's n bytes (seeded by seed) back and checks them;
// it says on started once the first echoed byte is back (or it failed).
func echoStream(c, s net.Conn, n, seed int, started chan<- struct{}) (err error) {
	once := false
	defer func() {
		if !once {
			started <- struct{}{}
		}
	}()
	go func() {
		_, _ = io.Copy(s, s)
		_ = s.(*smcr.Conn).CloseWrite()
	}()
	out := make([]byte, n)
	pattern(out, seed)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(out)
		if err == nil {
			err = c.(*smcr.Conn).CloseWrite()
		}
		werr <- err
	}()
	got := make([]byte, 0, n)
	buf := make([]byte, 32<<10)
	for {
		k, err := c.Read(buf)
		got = append(got, buf[:k]...)
		if k > 0 && !once {
			once = true
			started <- struct{}{}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if err := <-werr; err != nil {
		return err
	}
	if !bytes.Equal(got, out) {
		return fmt.Errorf("stream %d: %d bytes back, not the %d sent", seed, len(got), n)
	}
	return nil
}

// A device whose address is deleted fails every send (EINVAL): its links
// go down at once, without waiting for TEST_LINK, the connections move,
// and when the address is back the group adds a link there again.
func TestDeviceAddressGone(t *testing.T) {
	noLeaks(t)
	lp := newLinkPair(t, false, func(c *smcr.Config) {
		c.TestLinkInterval = -1 // no TEST_LINK: only the send errors can tell
	})
	c, s := lp.dialTwoLinks(t)
	i := lp.connLink(t, c)
	done := make(chan error, 1)
	go func() { done <- transfer(t, c, s, 8<<20) }()
	lp.paths.remove(true, lp.srv[i])
	lp.movedOff(t, c, i)
	requireTransferred(t, done, 60*time.Second)
	added := smcr.StatsOf(s.(*smcr.Conn)).LinksAdded
	lp.paths.remove(false, lp.srv[i])
	waitLinks(t, s, 2)
	require.Greater(t, smcr.StatsOf(s.(*smcr.Conn)).LinksAdded, added)
}

// SMC-Rv1 has no rkey list in ADD_LINK: the sides exchange every RMB's
// rkey on the new link in ADD_LINK_CONT messages, two each, in turn. With
// five connections a link added again takes three rounds; the connections
// then move onto it (when the other path's devices lose their addresses)
// and their streams arrive byte-exact, which they could not with an rkey
// missing or wrong.
func TestSMCRv1AddLinkCont(t *testing.T) {
	noLeaks(t)
	paths := newPaths(t)
	mem := memlink.NewNetwork()
	var srvDevs, cliDevs []netip.Addr
	p := newPairWith(t, func(srv, cli netip.Addr, c *smcr.Config) ([]netip.Addr, []netip.Addr) {
		// v1's IP area: the client's device on lo's 127.0.0.1/8 covers
		// the server's (memlink devices on loopback addresses).
		a := memAddrs(srv, 2)
		srvDevs, cliDevs = []netip.Addr{srv, a[0]}, []netip.Addr{netip.MustParseAddr("127.0.0.1"), a[1]}
		return srvDevs, cliDevs
	}, func(c *smcr.Config) {
		memDevices(c, mem)
		c.UEIDs = nil
		c.DevicePort = 14791
		c.TestLinkInterval = 20 * time.Millisecond
		smcr.FastLinkChecks(c, 500*time.Millisecond, 100*time.Millisecond)
		smcr.AddressesGone(c, func(a netip.Addr) bool { return !paths.isGone(a) }, 50*time.Millisecond)
	})
	var cs, ss []net.Conn
	for range 5 {
		c, s := p.dial(t)
		requireMode(t, c, smcr.ModeSMCRv1)
		cs, ss = append(cs, c), append(ss, s)
	}
	waitLinks(t, cs[0], 2)
	added := smcr.StatsOf(ss[0].(*smcr.Conn)).LinksAdded
	paths.remove(true, srvDevs[1], cliDevs[1])
	waitLinks(t, cs[0], 1)
	paths.remove(false, srvDevs[1], cliDevs[1])
	waitLinks(t, cs[0], 2)
	waitLinks(t, ss[0], 2)
	require.Greater(t, smcr.StatsOf(ss[0].(*smcr.Conn)).LinksAdded, added)
	paths.remove(true, srvDevs[0], cliDevs[0])
	for k := range cs {
		require.NoError(t, transfer(t, cs[k], ss[k], 300001))
		_, ls := linksOf(t, cs[k])
		require.Equal(t, cliDevs[1], ls[0].LocalGID, "connection %d moved to the link added again", k)
	}
}

// The peer's close CDC is lost on a path cut after it was posted, and its
// TCP FIN arrives first. The TCP watch's TEST_LINK must not take the
// answer as proof that no close is coming while the peer still has to
// send it again on the surviving link: here the client's failover waits
// until it has answered a TEST_LINK of the server's, which the server's
// check sends on the surviving link; the server's Read must then see the
// end of the stream, not a reset.
func TestCloseOvertakenByFINDuringFailover(t *testing.T) {
	noLeaks(t)
	lp := newLinkPair(t, true, func(c *smcr.Config) { c.TestLinkInterval = -1 })
	var armed atomic.Bool
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	smcr.OrderFailover(&lp.d.Config, func() { <-release }, func() {
		if armed.Load() {
			open()
		}
	})
	c, s := lp.dialTwoLinks(t)
	// One byte each way: each side's peer sends on the connection's link.
	var b [1]byte
	_, err := c.Write([]byte{1})
	require.NoError(t, err)
	_, err = io.ReadFull(s, b[:])
	require.NoError(t, err)
	_, err = s.Write([]byte{2})
	require.NoError(t, err)
	_, err = io.ReadFull(c, b[:])
	require.NoError(t, err)

	i := lp.connLink(t, c)
	armed.Store(true)
	lp.paths.cut(true, lp.path(i)...)
	require.NoError(t, c.(*smcr.Conn).CloseWrite()) // its CDC is lost; the FIN is not
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(b[:])
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, io.EOF, "the server's Read ends with the client's close, as after any CloseWrite")
	case <-time.After(60 * time.Second):
		t.Fatalf("hang: the client's close never arrived:\n c: %s\n s: %s", smcr.DebugState(c), smcr.DebugState(s))
	}
	require.Equal(t, 1-i, lp.connLink(t, s), "the connection moved to the surviving link")
}

// A CloseWrite on a link that went down before its connections moved
// waits for the move and sends its CDC on the surviving link: it neither
// fails (the path's error is not the connection's) nor lets the FIN go
// first. The client's failover is held until the CloseWrite has had its
// chance to fail.
func TestCloseWriteWaitsForTheMove(t *testing.T) {
	noLeaks(t)
	lp := newLinkPair(t, false, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	var once, rel sync.Once
	open := func() { rel.Do(func() { close(release) }) }
	t.Cleanup(open)
	smcr.OrderFailover(&lp.d.Config, func() {
		once.Do(func() { close(entered) })
		<-release
	}, nil)
	c, s := lp.dialTwoLinks(t)
	i := lp.connLink(t, c)
	lp.paths.remove(true, lp.cli[i])
	_, err := c.Write([]byte("x")) // its send fails: the link goes down
	require.NoError(t, err)
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- c.(*smcr.Conn).CloseWrite() }()
	select {
	case err := <-closed:
		t.Fatalf("CloseWrite returned (%v) while its link was down and the connection not moved", err)
	case <-time.After(200 * time.Millisecond): // long enough to see it fail; it waits
	}
	open()
	require.NoError(t, <-closed)
	got, err := io.ReadAll(s)
	require.NoError(t, err)
	require.Equal(t, "x", string(got), "the byte, then the end of the stream")
	require.Equal(t, 1-i, lp.connLink(t, c))
}
