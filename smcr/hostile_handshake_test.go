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

// neighbour returns another address of the pair's /24 (.1 is the server's
// device, .2 the client's): a source of its own for an attacker.
func neighbour(p *pair, last byte) netip.Addr {
	b := p.d.LocalAddr.As4()
	b[3] = last
	return netip.AddrFrom4(b)
}

// attackConns opens n TCP connections from src to the pair's listener,
// sends each what say returns (nothing when nil), and closes them when the
// test ends.
func attackConns(t *testing.T, p *pair, src netip.Addr, n int, say func(i int) []byte) []*net.TCPConn {
	t.Helper()
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 30 * time.Second}
	conns := make([]*net.TCPConn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range n {
		c, err := d.Dial("tcp", p.ln.Addr().String())
		require.NoError(t, err)
		tc := c.(*net.TCPConn)
		conns = append(conns, tc)
		if say != nil {
			_, err := tc.Write(say(i))
			require.NoError(t, err)
		}
	}
	return conns
}

// stalledProposal is a valid v2 Proposal of a client of its own (peer ID
// and GID), which the server answers with a first contact.
func stalledProposal(src netip.Addr, i int) []byte {
	f := proposalFields(src, "GOROCE-TEST-UEID")
	f.PeerID[0], f.PeerID[7] = 0x5A, byte(i)
	return smcwire.AppendProposal(nil, f)
}

// A real client's handshake succeeds, at once, while others keep the
// server busy as an attacker on the same host would: connections that say
// nothing, connections that send half a CLC header and stall, and first
// contacts that send a valid Proposal and never the Confirm (the server
// waits for it, with a link group built). Before handshake admission
// (per-source limits, the Proposal timeout, first contacts serialized per
// peer) each of them alone made the client's Accept wait run out.
func TestHandshakesNotDeniedByOtherPeers(t *testing.T) {
	half := proposal(netip.MustParseAddr("127.0.0.1"), "GOROCE-TEST-UEID")[:smcwire.CLCHeaderLen]
	silent := func(t *testing.T, p *pair) { attackConns(t, p, neighbour(p, 3), 1000, nil) }
	// Twice as many as the handshakes a listener runs: with 256 the
	// client's wait and theirs ran out together.
	halfCLC := func(t *testing.T, p *pair) { attackConns(t, p, neighbour(p, 4), 512, func(int) []byte { return half }) }
	stalled := func(t *testing.T, p *pair) {
		src := neighbour(p, 5)
		conns := attackConns(t, p, src, 3, func(i int) []byte { return stalledProposal(src, i) })
		// The first gets its Accept: its first contact is under way.
		require.NoError(t, conns[0].SetReadDeadline(time.Now().Add(30*time.Second)))
		a, err := smcwire.ParseAcceptConfirm(readCLC(t, conns[0]))
		require.NoError(t, err)
		require.True(t, a.FirstContact())
	}
	tests := []struct {
		name   string
		attack []func(*testing.T, *pair)
	}{
		{"1000 silent connections", []func(*testing.T, *pair){silent}},
		{"512 half-CLC connections", []func(*testing.T, *pair){halfCLC}},
		{"three stalled first contacts", []func(*testing.T, *pair){stalled}},
		{"all at once", []func(*testing.T, *pair){silent, halfCLC, stalled}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			p := newPair(t, nil)
			for _, a := range tt.attack {
				a(t, p)
			}
			c, s := p.dial(t)
			i := requireMode(t, c, smcr.ModeSMCRv2)
			require.True(t, i.FirstContact)
			exchange(t, c, s, 10000)
		})
	}
}
