//go:build linux

package afpacket_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/vethtest"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/afpacket"
	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/rocev2/device"
)

// RC between two devices over the veth pair: AF_PACKET on both sides, and
// AF_PACKET against the UDP backend, over IPv4 and IPv6. A capture on B's
// side shows what A put on the wire.

type rcNode struct {
	dev *device.Device
	cq  *cq.CQ
	qp  *qp.QP
	buf []byte
	mr  *device.MR
	psn rocev2.PSN
	gid device.GID
}

func newRCNode(t *testing.T, be backend.Backend) *rcNode {
	t.Helper()
	dev, err := device.New(device.Config{Backend: be})
	require.NoError(t, err)
	t.Cleanup(func() { dev.Close() })
	n := &rcNode{dev: dev, buf: make([]byte, 1<<17), psn: qp.RandomPSN()}
	pd := dev.AllocPD()
	n.cq, err = cq.New(1024, cq.Config{})
	require.NoError(t, err)
	access := device.AccessLocalWrite | device.AccessRemoteWrite | device.AccessRemoteRead
	n.mr, err = pd.RegisterMR(n.buf, access)
	require.NoError(t, err)
	n.qp, err = qp.Create(pd, qp.InitAttr{Type: qp.RC, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: qp.Cap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 2, MaxRecvSGE: 2}})
	require.NoError(t, err)
	return n
}

func (n *rcNode) connect(t *testing.T, peer *rcNode, gidIdx int) {
	t.Helper()
	gid, err := peer.dev.GID(gidIdx)
	require.NoError(t, err)
	access := device.AccessLocalWrite | device.AccessRemoteWrite | device.AccessRemoteRead
	require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, AccessFlags: access},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags))
	require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.RTR, PathMTU: rocev2.MTU1024, DestQPN: peer.qp.QPN(), RQPSN: peer.psn,
		MaxDestRdAtomic: 16, AH: qp.AH{DGID: gid, SGIDIndex: uint8(gidIdx), HopLimit: 64}},
		qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer))
	require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.RTS, SQPSN: n.psn, Timeout: 12, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
		qp.MaskState|qp.MaskSQPSN|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|qp.MaskMaxQPRdAtomic))
}

func (n *rcNode) sge(off, length int) qp.SGE {
	return qp.SGE{Addr: n.mr.VA() + uint64(off), Length: uint32(length), LKey: n.mr.LKey()}
}

func waitWC(t *testing.T, c *cq.CQ, want int) []cq.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
	defer cancel()
	var out []cq.WC
	buf := make([]cq.WC, 16)
	for len(out) < want {
		n := c.Poll(buf)
		out = append(out, buf[:n]...)
		if n > 0 || c.Arm(false) {
			continue
		}
		require.NoError(t, c.Wait(ctx), "waiting for %d completions, have %d", want, len(out))
	}
	for _, wc := range out {
		require.Equal(t, cq.Success, wc.Status, "%+v", wc)
	}
	return out
}

// exchange runs rounds of a 64 KiB WRITE, a SEND with the round number,
// and a READ of 8 KiB back, checking every byte.
func exchange(t *testing.T, a, b *rcNode, rounds int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for r := range rounds {
		_, err := b.qp.PostRecv([]qp.RecvWR{{WRID: 1, SGL: []qp.SGE{b.sge(1<<16, 64)}}})
		require.NoError(t, err)
		for i := range 1 << 16 {
			a.buf[i] = byte(rng.Uint32())
		}
		binary.BigEndian.PutUint32(a.buf[1<<16:], uint32(r))
		_, err = a.qp.PostSend([]qp.SendWR{
			{WRID: 1, Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{a.sge(0, 1<<16)}, RemoteAddr: b.mr.VA(), RKey: b.mr.RKey()},
			{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(1<<16, 4)}},
			{WRID: 3, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(1<<16+4096, 8192)}, RemoteAddr: b.mr.VA() + 4096, RKey: b.mr.RKey()},
		})
		require.NoError(t, err)
		waitWC(t, b.cq, 1)
		waitWC(t, a.cq, 2)
		require.True(t, bytes.Equal(a.buf[:1<<16], b.buf[:1<<16]), "round %d: WRITE data", r)
		require.Equal(t, uint32(r), binary.BigEndian.Uint32(b.buf[1<<16:]), "round %d: SEND data", r)
		require.True(t, bytes.Equal(a.buf[1<<16+4096:1<<16+4096+8192], b.buf[4096:4096+8192]), "round %d: READ data", r)
	}
}

// wireCapture collects the RoCEv2 frames arriving on an interface.
type wireCapture struct{ fd int }

func newWireCapture(t *testing.T, ns, ifn string) *wireCapture {
	t.Helper()
	c := &wireCapture{}
	require.NoError(t, vethtest.In(ns, func() error {
		ifi, err := net.InterfaceByName(ifn)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		c.fd = fd
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			return err
		}
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<20)
	}))
	t.Cleanup(func() { unix.Close(c.fd) })
	return c
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// drain returns the incoming RoCEv2 frames queued so far.
func (c *wireCapture) drain() [][]byte {
	var out [][]byte
	buf := make([]byte, 1<<17)
	for {
		n, from, err := unix.Recvfrom(c.fd, buf, unix.MSG_DONTWAIT)
		if err != nil {
			return out
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		var f rocev2.Frame
		if rocev2.ParseEthernetFrame(buf[:n], rocev2.UDPPort, &f) == nil {
			out = append(out, append([]byte(nil), buf[:n]...))
		}
	}
}

func TestVethRC(t *testing.T) { forModes(t, testVethRC) }

func testVethRC(t *testing.T, mode afpacket.ReceiveMode) {
	p := vethtest.New(t)
	for _, tc := range []struct {
		name   string
		a, b   netip.Addr
		udpB   bool
		gidIdx int
	}{
		{"AF_PACKET both sides IPv4", p.A, p.B, false, 1},
		{"AF_PACKET both sides IPv6", p.A6, p.B6, false, 1},
		{"AF_PACKET to the UDP backend IPv4", p.A, p.B, true, 1},
		{"AF_PACKET to the UDP backend IPv6", p.A6, p.B6, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capB := newWireCapture(t, p.NSB, p.IfB)
			a := newRCNode(t, open(t, p.NSA, afpacket.Config{Receive: mode, Interface: p.IfA, Addr: tc.a}))
			var bb backend.Backend
			if tc.udpB {
				require.NoError(t, vethtest.In(p.NSB, func() (err error) {
					bb, err = udp.Open(udp.Config{Addr: netip.AddrPortFrom(tc.b, rocev2.UDPPort)})
					return err
				}))
			} else {
				bb = open(t, p.NSB, afpacket.Config{Receive: mode, Interface: p.IfB, Addr: tc.b})
			}
			b := newRCNode(t, bb)
			a.connect(t, b, tc.gidIdx)
			b.connect(t, a, tc.gidIdx)
			exchange(t, a, b, 20)

			// A's frames as they arrived at B.
			port := rocev2.FlowLabelSourcePort(rocev2.CalcFlowLabel(a.qp.QPN(), b.qp.QPN()))
			var lastID uint16
			n := 0
			for _, fr := range capB.drain() {
				var f rocev2.Frame
				require.NoError(t, rocev2.ParseEthernetFrame(fr, rocev2.UDPPort, &f))
				if f.Src().WithZone("") != tc.a.WithZone("") {
					continue
				}
				match, ok := f.VerifyICRC()
				require.True(t, ok && match, "frame %d: ICRC", n)
				assert.Equal(t, port, f.SrcPort(), "frame %d: rxe's source port for QPs %#x and %#x", n, a.qp.QPN(), b.qp.QPN())
				if tc.a.Is4() {
					id := binary.BigEndian.Uint16(f.IP[4:])
					if n > 0 {
						assert.Equal(t, lastID+1, id, "frame %d: the next IPv4 ID", n)
					}
					lastID = id
					assert.Equal(t, uint8(64), f.IP[8], "the system's TTL")
				} else {
					assert.Equal(t, rocev2.CalcFlowLabel(a.qp.QPN(), b.qp.QPN()), binary.BigEndian.Uint32(f.IP[0:])&0xFFFFF, "flow label")
				}
				n++
			}
			assert.GreaterOrEqual(t, n, 20*66, "A's frames captured (64 WRITE, a SEND and a READ request a round)")
			for _, name := range []string{"rcvd_icrc_err", "rcvd_bad_encap", "rcvd_bad_checksum", "rcvd_not_roce", "rcvd_truncated"} {
				for _, d := range []*device.Device{a.dev, b.dev} {
					v, _ := d.Counters.Get(name)
					assert.Zero(t, v, "%s", name)
				}
			}
			gid0, _ := a.dev.GID(0)
			assert.Equal(t, p.LinkLocalA.WithZone(""), gid0.Addr(), "GID 0 is the interface's link-local address")
		})
	}
}
