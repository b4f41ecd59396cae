//go:build linux

package afpacket_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/vethtest"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/afpacket"
	"github.com/goroce/goroce/rocev2/device"
)

// udNode is a UD QP on a device.
type udNode struct {
	dev *device.Device
	pd  *device.PD
	cq  *cq.CQ
	qp  *qp.QP
	buf []byte
	mr  *device.MR
}

const udQKey = 0x11111111

func newUDNode(t *testing.T, be backend.Backend) *udNode {
	t.Helper()
	dev, err := device.New(device.Config{Backend: be})
	require.NoError(t, err)
	t.Cleanup(func() { dev.Close() })
	n := &udNode{dev: dev, pd: dev.AllocPD(), buf: make([]byte, 8192)}
	n.cq, err = cq.New(64, cq.Config{})
	require.NoError(t, err)
	n.mr, err = n.pd.RegisterMR(n.buf, device.AccessLocalWrite)
	require.NoError(t, err)
	n.qp, err = qp.Create(n.pd, qp.InitAttr{Type: qp.UD, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: qp.Cap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, QKey: udQKey}, qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskQKey))
	require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.RTR}, qp.MaskState))
	require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.RTS, SQPSN: qp.RandomPSN()}, qp.MaskState|qp.MaskSQPSN))
	return n
}

// TestVethUD sends UD SENDs between two AF_PACKET devices: each packet's
// IP header carries the traffic class of its address handle and the
// system's hop limit (not the handle's 33, as ib_core gives rxe),
// and the receiver's GRH area is that header as it arrived (what rxe puts
// there), from A's address to B's.
func TestVethUD(t *testing.T) { forModes(t, testVethUD) }

func testVethUD(t *testing.T, mode afpacket.ReceiveMode) {
	p := vethtest.New(t)
	for _, tc := range []struct {
		name string
		a, b netip.Addr
	}{
		{"IPv4", p.A, p.B},
		{"IPv6", p.A6, p.B6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capB := newWireCapture(t, p.NSB, p.IfB)
			a := newUDNode(t, open(t, p.NSA, afpacket.Config{Receive: mode, Interface: p.IfA, Addr: tc.a}))
			b := newUDNode(t, open(t, p.NSB, afpacket.Config{Receive: mode, Interface: p.IfB, Addr: tc.b}))
			gidB, err := b.dev.GID(1)
			require.NoError(t, err)
			ah, err := qp.CreateAH(a.pd, qp.AH{DGID: gidB, SGIDIndex: 1, HopLimit: 33, TClass: 0x28})
			require.NoError(t, err)

			const size = 1000
			for i := range size {
				a.buf[i] = byte(i * 7)
			}
			_, err = b.qp.PostRecv([]qp.RecvWR{{WRID: 5, SGL: []qp.SGE{{Addr: b.mr.VA(), Length: rocev2.GRHLen + size, LKey: b.mr.LKey()}}}})
			require.NoError(t, err)
			_, err = a.qp.PostSend([]qp.SendWR{{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled,
				SGL: []qp.SGE{{Addr: a.mr.VA(), Length: size, LKey: a.mr.LKey()}}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: udQKey}})
			require.NoError(t, err)
			waitWC(t, a.cq, 1)
			wc := waitWC(t, b.cq, 1)[0]
			assert.Equal(t, uint32(rocev2.GRHLen+size), wc.ByteLen)
			assert.Equal(t, a.qp.QPN(), wc.SrcQP)
			assert.Equal(t, cq.WithGRH, wc.Flags&cq.WithGRH)
			assert.True(t, bytes.Equal(a.buf[:size], b.buf[rocev2.GRHLen:rocev2.GRHLen+size]), "payload after the GRH area")

			src, dst, ok := rocev2.GRHSource(b.buf)
			require.True(t, ok, "% x", b.buf[:rocev2.GRHLen])
			assert.Equal(t, tc.a.WithZone(""), src.Unmap())
			assert.Equal(t, tc.b.WithZone(""), dst.Unmap())

			var frames int
			for _, fr := range capB.drain() {
				var f rocev2.Frame
				require.NoError(t, rocev2.ParseEthernetFrame(fr, rocev2.UDPPort, &f))
				if f.Src().WithZone("") != tc.a.WithZone("") {
					continue
				}
				frames++
				grh := b.buf[:rocev2.GRHLen]
				if tc.a.Is4() {
					assert.Equal(t, uint8(64), f.IP[8], "the system's TTL, not the address handle's")
					assert.Equal(t, uint8(0x28), f.IP[1], "TOS from the address handle")
					assert.Equal(t, f.IP[:rocev2.IPv4HeaderLen], grh[rocev2.GRHLen-rocev2.IPv4HeaderLen:], "the GRH area is the IPv4 header as it arrived")
				} else {
					assert.Equal(t, uint8(64), f.IP[7], "the system's hop limit, not the address handle's")
					assert.Equal(t, uint8(0x28), f.IP[0]<<4|f.IP[1]>>4, "traffic class from the address handle")
					assert.Equal(t, f.IP[4:], grh[4:], "the GRH area is the IPv6 header as it arrived, but for the flow label (rxe reports 0)")
				}
			}
			assert.Equal(t, 1, frames)
		})
	}
}
