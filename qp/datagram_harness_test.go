package qp

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/rocev2/device"
)

// testQKey is the Q_Key of the UD QPs in these tests (ud_pingpong's).
const testQKey = 0x11111111

// waitLimit bounds a wait for what is in flight: a hang guard only.
const waitLimit = 10 * time.Second

// dgConfig configures a pair of UC or UD nodes (or an RC pair on an SRQ).
type dgConfig struct {
	typ     Type
	mtu     rocev2.MTU // UC path MTU (UD: the port's)
	bufSize int
	depth   int
	srq     *SRQAttr // create the receive side on an SRQ with these attributes
	udp     bool     // real UDP sockets on 127.0.0.1 and 127.0.0.2
	access  device.Access
	wrap    func(backend.Backend) backend.Backend
	maxMTU  rocev2.MTU // cap the devices' active MTU (UD)
}

func (c *dgConfig) defaults() {
	if c.mtu == 0 {
		c.mtu = rocev2.MTU1024
	}
	if c.bufSize == 0 {
		c.bufSize = 1 << 16
	}
	if c.depth == 0 {
		c.depth = 64
	}
	if c.access == 0 {
		c.access = device.AccessLocalWrite | device.AccessRemoteWrite
	}
}

// dgNode is one side: a device, PD, CQ, buffer, one QP of cfg.typ
// (optionally on an SRQ) and, for UD, an address handle to the peer.
type dgNode struct {
	node
	srq *SRQ
	ah  *AddressHandle // UD: to the peer
	cfg dgConfig
}

// newDgPair builds two nodes on an in-memory network (or UDP) and takes
// their QPs to RTS towards each other.
func newDgPair(t testing.TB, cfg dgConfig) (a, b *dgNode) {
	t.Helper()
	cfg.defaults()
	network := memlink.NewNetwork()
	mk := func(addr string) *dgNode {
		var backend backend.Backend
		ap := netip.MustParseAddrPort(addr)
		if cfg.udp {
			be, err := udp.Open(udp.Config{Addr: netip.AddrPortFrom(ap.Addr(), 0)})
			require.NoError(t, err)
			backend = be
		} else {
			be, err := network.Attach(ap)
			require.NoError(t, err)
			backend = be
		}
		if cfg.wrap != nil {
			backend = cfg.wrap(backend)
		}
		dev, err := device.New(device.Config{Backend: backend, MaxMTU: cfg.maxMTU})
		require.NoError(t, err)
		t.Cleanup(func() { dev.Close() })
		n := &dgNode{cfg: cfg}
		n.dev, n.pd, n.buf, n.psn = dev, dev.AllocPD(), make([]byte, cfg.bufSize), RandomPSN()
		if !cfg.udp {
			n.net = network
		}
		n.cq, err = cq.New(4*cfg.depth+16, cq.Config{})
		require.NoError(t, err)
		n.poll = dev.NewPoller(n.cq)
		n.mr, err = n.pd.RegisterMR(n.buf, cfg.access)
		require.NoError(t, err)
		ia := InitAttr{
			Type: cfg.typ, SendCQ: n.cq, RecvCQ: n.cq,
			Cap: Cap{MaxSendWR: cfg.depth, MaxRecvWR: cfg.depth, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 256},
		}
		if cfg.srq != nil {
			n.srq, err = CreateSRQ(n.pd, SRQInitAttr{Attr: *cfg.srq})
			require.NoError(t, err)
			ia.SRQ = n.srq
		}
		n.qp, err = Create(n.pd, ia)
		require.NoError(t, err)
		return n
	}
	a, b = mk("127.0.0.1:4791"), mk("127.0.0.2:4791")
	a.connect(t, b)
	b.connect(t, a)
	return a, b
}

// connect takes n's QP to RTS towards peer, as the pingpong programs do.
func (n *dgNode) connect(t testing.TB, peer *dgNode) {
	t.Helper()
	gid, err := peer.dev.GID(1)
	require.NoError(t, err)
	ah := AH{DGID: gid, SGIDIndex: 1, HopLimit: 64, DestPort: peer.dev.LocalAddr().Port()}
	switch n.cfg.typ {
	case UD:
		require.NoError(t, n.qp.Modify(&Attr{State: Init, Port: 1, QKey: testQKey}, MaskState|MaskPKeyIndex|MaskPort|MaskQKey))
		require.NoError(t, n.qp.Modify(&Attr{State: RTR}, MaskState))
		require.NoError(t, n.qp.Modify(&Attr{State: RTS, SQPSN: n.psn}, MaskState|MaskSQPSN))
		n.ah, err = CreateAH(n.pd, ah)
		require.NoError(t, err)
	case UC:
		require.NoError(t, n.qp.Modify(&Attr{State: Init, Port: 1, AccessFlags: n.cfg.access}, MaskState|MaskPKeyIndex|MaskPort|MaskAccessFlags))
		require.NoError(t, n.qp.Modify(&Attr{State: RTR, PathMTU: n.cfg.mtu, DestQPN: peer.qp.QPN(), RQPSN: peer.psn, AH: ah},
			MaskState|MaskAV|MaskPathMTU|MaskDestQPN|MaskRQPSN))
		require.NoError(t, n.qp.Modify(&Attr{State: RTS, SQPSN: n.psn}, MaskState|MaskSQPSN))
	case RC:
		connect(t, &n.node, &peer.node, pairConfig{mtu: n.cfg.mtu, access: n.cfg.access})
	}
}

// udSend returns a UD SEND of buf[off:off+length] to the peer's QP.
func (n *dgNode) udSend(wrid uint64, peer *dgNode, off, length int) SendWR {
	return SendWR{
		WRID: wrid, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{n.sge(off, length)},
		AH: n.ah, RemoteQPN: peer.qp.QPN(), RemoteQKey: testQKey,
	}
}

// postRecv posts one receive of buf[off:off+length] to the QP or its SRQ.
func (n *dgNode) postRecv(t testing.TB, wrid uint64, off, length int) {
	t.Helper()
	wr := []RecvWR{{WRID: wrid, SGL: []SGE{n.sge(off, length)}}}
	var err error
	if n.srq != nil {
		_, err = n.srq.PostRecv(wr)
	} else {
		_, err = n.qp.PostRecv(wr)
	}
	require.NoError(t, err)
}

// attacker is a sender on the nodes' network with an address of its own:
// it sends hand-built packets, which its backend seals with a valid ICRC.
type attacker struct {
	be   *memlink.Backend
	addr netip.AddrPort
}

// newAttacker attaches an attacker to the network of node n (memlink only).
func newAttacker(t testing.TB, n *node, addr string) *attacker {
	t.Helper()
	require.NotNil(t, n.net, "the attacker needs the in-memory network")
	ap := netip.MustParseAddrPort(addr)
	be, err := n.net.Attach(ap)
	require.NoError(t, err)
	t.Cleanup(func() { be.Close() })
	go func() { // take whatever is sent to it
		batch := make([]backend.Incoming, 64)
		for {
			if _, err := be.Receive(batch); err != nil {
				return
			}
		}
	}()
	return &attacker{be: be, addr: ap}
}

// send sends the packet fl with payload to n's device.
func (a *attacker) send(t testing.TB, n *node, fl rocev2.Fields, payload []byte) {
	t.Helper()
	fl.PKey = 0xffff
	p, err := fl.Append(nil, payload)
	require.NoError(t, err)
	a.sendRaw(t, n, p)
}

func (a *attacker) sendRaw(t testing.TB, n *node, p []byte) {
	t.Helper()
	require.NoError(t, a.be.Send([]backend.Outgoing{{Buf: p, Dst: n.dev.LocalAddr()}}))
}

// counter reads the named counter of n's device.
func (n *node) counter(t testing.TB, name string) uint64 {
	t.Helper()
	v, ok := n.dev.Counters.Get(name)
	require.True(t, ok, name)
	return v
}

// waitCounter waits until n's named counter reaches want (a hang guard:
// the packets it counts are in flight on the in-memory network).
func (n *node) waitCounter(t testing.TB, name string, want uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return n.counter(t, name) >= want }, waitLimit, 50*time.Microsecond,
		"counter %s stuck at %d, want %d", name, n.counter(t, name), want)
}

// snapshot returns a copy of n's buffer, to prove later that nothing
// changed it.
func (n *node) snapshot() []byte { return bytes.Clone(n.buf) }
