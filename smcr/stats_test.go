package smcr_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
)

// The statistics count what Linux's count: an SMC-R connection on each
// side by role and version, every byte each way, the buffers made; a
// fallback by side and reason.
func TestStats(t *testing.T) {
	before := smcr.ReadStats()
	p := newPair(t, nil)
	c, s := p.dial(t)
	const n = 300000
	exchange(t, c, s, n)
	after := smcr.ReadStats()
	assert.Equal(t, uint64(1), after.ClientV2-before.ClientV2)
	assert.Equal(t, uint64(1), after.ServerV2-before.ServerV2)
	assert.Equal(t, uint64(2*n), after.TxBytes-before.TxBytes, "both sides' writes (both in this process)")
	assert.Equal(t, uint64(2*n), after.RxBytes-before.RxBytes)
	assert.Equal(t, uint64(2), after.RMB.Alloc-before.RMB.Alloc, "an RMB per side")
	assert.Equal(t, uint64(2), after.RMB.Sizes[smcr.SizeBucket(64<<10)]-before.RMB.Sizes[smcr.SizeBucket(64<<10)], "of 64 KiB")
	assert.Greater(t, after.CDCSent, before.CDCSent)
	assert.Greater(t, after.CDCReceived, before.CDCReceived)
	assert.Greater(t, after.LLCSent, before.LLCSent, "CONFIRM_LINK at least")
	assert.Greater(t, after.SendBuf.SizeSmall, before.SendBuf.SizeSmall, "a 300 KB write is larger than the 64 KiB send buffer")

	// A fallback: no SMC told to a plain TCP server.
	tl, err := net.Listen("tcp", netip.AddrPortFrom(addrOf(c.LocalAddr()), 0).String())
	require.NoError(t, err)
	defer tl.Close()
	d := p.d
	d.Config.PeerSpeaksSMC = false
	fc, err := d.DialContext(context.Background(), "tcp", tl.Addr().String())
	require.NoError(t, err)
	defer fc.Close()
	fb := smcr.ReadStats()
	assert.Equal(t, uint64(1), fb.ClientFallbacks-after.ClientFallbacks)
	assert.Equal(t, fb.ServerFallbacks, after.ServerFallbacks)
	assert.Equal(t, uint64(1), count(fb, false, smcwire.DiagPeerNoSMC)-count(after, false, smcwire.DiagPeerNoSMC))
}

func count(s smcr.Stats, server bool, code smcwire.DiagCode) uint64 {
	for _, r := range s.FallbackReasons {
		if r.Server == server && r.Code == code {
			return r.Count
		}
	}
	return 0
}

func addrOf(a net.Addr) netip.Addr { return a.(*net.TCPAddr).AddrPort().Addr().Unmap() }

// Linux's buckets: up to 8 KiB, 16 KiB, ... 1 MiB, and above.
func TestSizeBucket(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 0}, {1, 0}, {8 << 10, 0}, {8<<10 + 1, 1}, {16 << 10, 1}, {64 << 10, 3}, {512<<10 + 1, 7}, {1 << 20, 7}, {1<<20 + 1, 8}, {1 << 30, 8},
	} {
		assert.Equal(t, tc.want, smcr.SizeBucket(tc.n), tc.n)
	}
}

// Sums of several processes' statistics add every counter and merge the
// fallback reasons, the most frequent first.
func TestStatsAdd(t *testing.T) {
	a := smcr.Stats{ClientV2: 1, TxBytes: 10, RMB: smcr.BufStats{Alloc: 1, Sizes: [9]uint64{3: 1}},
		FallbackReasons: []smcr.FallbackCount{{Server: true, Code: smcwire.DiagPeerNoSMC, Count: 2}}}
	b := smcr.Stats{ServerV2: 1, TxBytes: 5, RMB: smcr.BufStats{Alloc: 2, Sizes: [9]uint64{3: 2}},
		FallbackReasons: []smcr.FallbackCount{{Server: true, Code: smcwire.DiagPeerNoSMC, Count: 1}, {Code: smcwire.DiagNoUEID, Count: 7}}}
	a.Add(&b)
	assert.Equal(t, uint64(1), a.ClientV2)
	assert.Equal(t, uint64(1), a.ServerV2)
	assert.Equal(t, uint64(15), a.TxBytes)
	assert.Equal(t, smcr.BufStats{Alloc: 3, Sizes: [9]uint64{3: 3}}, a.RMB)
	assert.Equal(t, []smcr.FallbackCount{{Code: smcwire.DiagNoUEID, Count: 7}, {Server: true, Code: smcwire.DiagPeerNoSMC, Count: 3}}, a.FallbackReasons)
}

// A snapshot carries the link groups, each with its link, and the
// statistics.
func TestPublishLinkGroupsAndStats(t *testing.T) {
	dir := t.TempDir()
	pub, err := smcr.Publish(dir)
	require.NoError(t, err)
	defer pub.Close()
	p := newPair(t, nil)
	c, _ := p.dial(t)
	ci := c.(*smcr.Conn).Info()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := smcr.ReadPublished(ctx, pub.Path())
	require.NoError(t, err)
	require.NotNil(t, snap.Stats)
	assert.GreaterOrEqual(t, snap.Stats.ClientV2, uint64(1))
	var mine []smcr.LinkGroupInfo
	for _, g := range snap.Groups {
		if g.ID == ci.LinkGroup && g.Device.Addr() == addrOf(c.LocalAddr()) {
			mine = append(mine, g)
		}
	}
	require.Len(t, mine, 1, "%+v", snap.Groups)
	g := mine[0]
	assert.Equal(t, "client", g.Role)
	assert.Equal(t, "SINGLE", g.Type)
	assert.Equal(t, 2, g.Version)
	assert.Equal(t, 1, g.Conns)
	require.Len(t, g.Links, 1)
	assert.Equal(t, linkIdentities(ci.Links), linkIdentities([]smcr.LinkInfo{g.Links[0].LinkInfo}))
	assert.Equal(t, "LINK_ACTIVE", g.Links[0].State)
}

// linkIdentities are what names each link, without its counters (which
// move on between two looks at a live link).
func linkIdentities(ls []smcr.LinkInfo) [][]any {
	out := make([][]any, len(ls))
	for i, l := range ls {
		out[i] = []any{l.ID, l.LocalGID, l.PeerGID, l.LocalQPN, l.PeerQPN, l.MTU, l.Path, l.UserID, l.PeerUserID, l.Device}
	}
	return out
}
