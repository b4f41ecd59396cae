package smcr_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
)

// victimProposal is a Proposal that names the victim client's peer ID and
// GID, as a third party that learned (or guessed) them sends it.
func victimProposal(victim net.Conn, victimAddr netip.Addr) []byte {
	f := proposalFields(victimAddr, "GOROCE-TEST-UEID")
	f.PeerID = smcr.PeerIDOf(victim)
	return smcwire.AppendProposal(nil, f)
}

// strangerAccept connects from src, sends the victim's Proposal and
// returns the connection and the server's Accept.
func strangerAccept(t *testing.T, p *pair, src netip.Addr, victim net.Conn) (*net.TCPConn, smcwire.AcceptConfirm) {
	t.Helper()
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
	nc, err := d.Dial("tcp", p.ln.Addr().String())
	require.NoError(t, err)
	tc := nc.(*net.TCPConn)
	t.Cleanup(func() { tc.Close() })
	require.NoError(t, tc.SetDeadline(time.Now().Add(30*time.Second))) // hang guard
	_, err = tc.Write(victimProposal(victim, p.d.LocalAddr))
	require.NoError(t, err)
	a, err := smcwire.ParseAcceptConfirm(readCLC(t, tc))
	require.NoError(t, err)
	return tc, a
}

// A third party that names another client's peer ID and GID in its
// Proposal, from an address of its own, is not given that client's link
// group (it gets a first contact), and its out-of-sync Decline ends
// nothing of the client's. (Linux, and goroce before, matched the
// Proposal's peer ID and GID alone: the stranger got the victim's group,
// and its Decline terminated it, which the victim learned 30 s later.)
func TestThirdPartyCannotEndALinkGroup(t *testing.T) {
	noLeaks(t)
	p := newPair(t, nil)
	c, s := p.dial(t)
	victim := requireMode(t, c, smcr.ModeSMCRv2)

	tc, a := strangerAccept(t, p, neighbour(p, 6), c)
	require.True(t, a.FirstContact(), "the stranger was given the victim's link group")
	decline := smcwire.AppendDecline(nil, &smcwire.DeclineFields{CLCHeader: smcwire.CLCHeader{Version: 2, FirstContact: true},
		PeerID: smcr.PeerIDOf(c), Diagnosis: smcwire.DiagSyncErr, OSType: smcwire.OSLinux})
	_, err := tc.Write(decline)
	require.NoError(t, err)
	// Once the listener hands the stranger's fallback out, it has read
	// the Decline.
	fb := acceptOne(t, p, tc)
	defer fb.Close()
	require.Equal(t, smcr.ModeFallback, info(fb).Mode)

	require.False(t, smcr.LinkDown(s), "the stranger's Decline took the victim's link down")
	exchange(t, c, s, 10000)
	c2, _ := p.dial(t)
	i := requireMode(t, c2, smcr.ModeSMCRv2)
	require.False(t, i.FirstContact)
	require.Equal(t, victim.LinkGroup, i.LinkGroup, "the victim's group serves it on")
}

// A client's subsequent Confirm must name the link its group has: one
// that names another QP (here a stranger on the victim's own address that
// knows its peer ID) is declined, and the group is left alone.
func TestConfirmNamesTheGroupsLink(t *testing.T) {
	noLeaks(t)
	p := newPair(t, nil)
	c, s := p.dial(t)
	victim := requireMode(t, c, smcr.ModeSMCRv2)

	tc, a := strangerAccept(t, p, p.d.LocalAddr, c)
	require.False(t, a.FirstContact(), "from the victim's address, with its peer ID: its group")
	confirm := smcwire.AppendAcceptConfirm(nil, &smcwire.AcceptConfirmFields{
		CLCHeader: smcwire.CLCHeader{Version: 2, TypeV1: smcwire.TypeR}, Confirm: true,
		PeerID: smcr.PeerIDOf(c), GID: gidOfAddr(p.d.LocalAddr), MAC: smcwire.MAC{2, 0, 0, 0, 0, 1},
		QPN: victim.Links[0].LocalQPN + 1, RMBRKey: 0x1234, RMBEIndex: 1, AlertToken: 7, RMBESizeCode: 1, QPMTU: 3,
		RMBVA: 0x10000, PSN: 1, EID: smcwire.EIDFrom("GOROCE-TEST-UEID"),
	})
	_, err := tc.Write(confirm)
	require.NoError(t, err)
	d, err := smcwire.ParseDecline(readCLC(t, tc))
	require.NoError(t, err, "the server accepted a Confirm for a QP of no link of the group")
	require.Equal(t, smcwire.DiagSyncErr, d.Diagnosis())
	fb := acceptOne(t, p, tc)
	defer fb.Close()
	require.Equal(t, smcr.ModeFallback, info(fb).Mode)

	require.False(t, smcr.LinkDown(s))
	exchange(t, c, s, 10000)
}

// The peer ID is not the device's address in disguise: Linux's layout (two
// random bytes, then a MAC), but the MAC of a goroce device without an
// interface is random, not 02:00 and the IPv4 address.
func TestPeerIDNotFromTheAddress(t *testing.T) {
	noLeaks(t)
	p := newPair(t, nil)
	c, _ := p.dial(t)
	id := smcr.PeerIDOf(c)
	a := p.d.LocalAddr.As4()
	require.NotEqual(t, [6]byte{2, 0, a[0], a[1], a[2], a[3]}, [6]byte(id[2:]), "peer ID %x", id)
	require.Equal(t, byte(0x02), id[2]&0x03, "a locally administered unicast MAC: %x", id)
}
