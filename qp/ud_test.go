package qp

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
)

// UD SENDs of every size class up to the port's MTU, with and without
// immediate data, inline or not, arrive whole behind the 40-byte GRH area,
// with the completion fields a ud_pingpong reads: byte_len counting the
// GRH, the GRH flag, the sender's QP number, the immediate data.
func TestUDSendReceive(t *testing.T) {
	for _, tr := range []struct {
		name string
		udp  bool
	}{{"memlink", false}, {"udp", true}} {
		t.Run(tr.name, func(t *testing.T) {
			a, b := newDgPair(t, dgConfig{typ: UD, udp: tr.udp, maxMTU: rocev2.MTU4096})
			mtu := b.dev.Port().ActiveMTU.Bytes()
			require.Equal(t, 4096, mtu)
			for i := range a.buf {
				a.buf[i] = byte(i*7 + 3)
			}
			for _, tc := range []struct {
				size   int
				imm    bool
				inline bool
			}{
				{0, false, false}, {1, false, false}, {3, true, false}, {40, false, true},
				{255, true, true}, {1024, false, false}, {4095, true, false}, {4096, false, false},
			} {
				clear(b.buf)
				b.postRecv(t, 1, 0, mtu+rocev2.GRHLen)
				wr := a.udSend(2, b, 100, tc.size)
				if tc.imm {
					wr.Opcode, wr.Imm = WRSendWithImm, 0xdeadbeef
				}
				if tc.inline {
					wr.Flags |= SendInline
					wr.Inline = a.buf[100 : 100+tc.size]
				}
				_, err := a.qp.PostSend([]SendWR{wr})
				require.NoError(t, err, "size %d", tc.size)
				s := waitWCs(t, a.cq, 1, waitLimit)[0]
				assert.Equal(t, cq.WC{WRID: 2, Opcode: cq.OpSend, ByteLen: uint32(tc.size), QPNum: a.qp.QPN()}, s)

				r := waitWCs(t, b.cq, 1, waitLimit)[0]
				want := cq.WC{
					WRID: 1, Opcode: cq.OpRecv, Flags: cq.WithGRH, ByteLen: uint32(rocev2.GRHLen + tc.size),
					QPNum: b.qp.QPN(), SrcQP: a.qp.QPN(),
				}
				if tc.imm {
					want.Flags |= cq.WithImm
					want.Imm = 0xdeadbeef
				}
				assert.Equal(t, want, r, "size %d", tc.size)
				assert.Equal(t, a.buf[100:100+tc.size], b.buf[rocev2.GRHLen:rocev2.GRHLen+tc.size], "size %d: payload", tc.size)

				// The GRH area: the IPv4 header the packet came in, at
				// bytes 20-39, as rxe fills it.
				grh := b.buf[:rocev2.GRHLen]
				require.Equal(t, make([]byte, 20), grh[:20])
				ip := grh[20:]
				assert.Equal(t, byte(0x45), ip[0])
				hdr := rocev2.UDSendOnly.HeaderLen()
				if tc.imm {
					hdr = rocev2.UDSendOnlyImm.HeaderLen()
				}
				roceLen := hdr + tc.size + rocev2.PadFor(tc.size) + rocev2.ICRCLen
				assert.Equal(t, uint16(rocev2.IPv4HeaderLen+rocev2.UDPHeaderLen+roceLen), binary.BigEndian.Uint16(ip[2:]), "total length")
				assert.Equal(t, uint16(rocev2.IPv4DontFragment), binary.BigEndian.Uint16(ip[6:]), "flags")
				assert.Equal(t, byte(64), ip[8], "TTL")
				assert.Equal(t, byte(17), ip[9], "protocol")
				assert.Zero(t, rocev2.IPv4Checksum(ip), "header checksum")
				src, dst, ok := rocev2.GRHSource(grh)
				require.True(t, ok)
				assert.Equal(t, a.dev.LocalAddr().Addr(), src)
				assert.Equal(t, b.dev.LocalAddr().Addr(), dst)
			}
		})
	}
}

// What a UD send may not be fails at the post, and nothing goes out.
func TestUDPostErrors(t *testing.T) {
	a, b := newDgPair(t, dgConfig{typ: UD})
	mtu := a.dev.Port().ActiveMTU.Bytes()
	other, err := CreateAH(a.dev.AllocPD(), a.ah.Attr())
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		wr   func() SendWR
	}{
		{"larger than the MTU", func() SendWR { return a.udSend(1, b, 0, mtu+1) }},
		{"larger than the MTU in two SGEs", func() SendWR {
			wr := a.udSend(1, b, 0, mtu)
			wr.SGL = append(wr.SGL, a.sge(0, 1))
			return wr
		}},
		{"inline larger than the MTU", func() SendWR {
			wr := a.udSend(1, b, 0, 0)
			wr.Flags |= SendInline
			wr.Inline = make([]byte, mtu+1)
			return wr
		}},
		{"no address handle", func() SendWR { wr := a.udSend(1, b, 0, 8); wr.AH = nil; return wr }},
		{"an address handle of another PD", func() SendWR { wr := a.udSend(1, b, 0, 8); wr.AH = other; return wr }},
		{"a QPN of 25 bits", func() SendWR { wr := a.udSend(1, b, 0, 8); wr.RemoteQPN = 1 << 24; return wr }},
		{"RDMA WRITE", func() SendWR { wr := a.udSend(1, b, 0, 8); wr.Opcode = WRRDMAWrite; return wr }},
		{"RDMA READ", func() SendWR { wr := a.udSend(1, b, 0, 8); wr.Opcode = WRRDMARead; return wr }},
		{"atomic", func() SendWR { wr := a.udSend(1, b, 0, 8); wr.Opcode = WRAtomicFetchAdd; return wr }},
		{"SEND with invalidate", func() SendWR { wr := a.udSend(1, b, 0, 8); wr.Opcode = WRSendWithInv; return wr }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := a.dev.Counters.SentPkts.Load()
			n, err := a.qp.PostSend([]SendWR{tc.wr()})
			assert.Zero(t, n)
			assert.ErrorIs(t, err, ErrBadWR)
			assert.Equal(t, sent, a.dev.Counters.SentPkts.Load())
			requireNoWC(t, a.cq)
		})
	}
	// The QP is fine: a valid send goes.
	b.postRecv(t, 1, 0, mtu+rocev2.GRHLen)
	_, err = a.qp.PostSend([]SendWR{a.udSend(2, b, 0, mtu)})
	require.NoError(t, err)
	waitWCs(t, b.cq, 1, waitLimit)
}

// A remote Q_Key with its high bit set stands for the sending QP's own.
func TestUDPrivilegedQKeyMeansQPsOwn(t *testing.T) {
	a, b := newDgPair(t, dgConfig{typ: UD})
	b.postRecv(t, 1, 0, 1024)
	wr := a.udSend(2, b, 0, 8)
	wr.RemoteQKey = 0x80000000
	_, err := a.qp.PostSend([]SendWR{wr})
	require.NoError(t, err)
	r := waitWCs(t, b.cq, 1, waitLimit)[0]
	assert.Equal(t, cq.Success, r.Status)
}

// The UD modify rules are the kernel's: a Q_Key at INIT, nothing at RTR, a
// send PSN at RTS; connected-mode attributes are refused.
func TestUDModifyRules(t *testing.T) {
	a, _ := newDgPair(t, dgConfig{typ: UD})
	q := a.qp
	require.NoError(t, q.Modify(&Attr{State: Reset}, MaskState))
	require.Error(t, q.Modify(&Attr{State: Init, Port: 1}, MaskState|MaskPKeyIndex|MaskPort), "no Q_Key")
	require.Error(t, q.Modify(&Attr{State: Init, Port: 1, QKey: 1}, MaskState|MaskPKeyIndex|MaskPort|MaskQKey|MaskAccessFlags), "access flags")
	require.NoError(t, q.Modify(&Attr{State: Init, Port: 1, QKey: 7}, MaskState|MaskPKeyIndex|MaskPort|MaskQKey))
	require.Error(t, q.Modify(&Attr{State: RTR, DestQPN: 5}, MaskState|MaskDestQPN), "dest QPN")
	require.NoError(t, q.Modify(&Attr{State: RTR}, MaskState))
	require.Error(t, q.Modify(&Attr{State: RTS}, MaskState), "no SQ PSN")
	require.NoError(t, q.Modify(&Attr{State: RTS, SQPSN: 9, QKey: 8}, MaskState|MaskSQPSN|MaskQKey))
	attr := q.Query()
	assert.Equal(t, uint32(8), attr.QKey)
	assert.Equal(t, a.dev.Port().ActiveMTU, attr.PathMTU, "a UD QP's MTU is the port's")
}

// Every remote-input rule of the UD responder, with a hostile packet each:
// dropped, counted, the receive buffer unchanged, and the QP fine after.
func TestUDHostilePackets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		counter string
		send    func(t *testing.T, x *attacker, b *dgNode)
	}{
		{"wrong Q_Key", "qkey_viol", func(t *testing.T, x *attacker, b *dgNode) {
			x.send(t, &b.node, rocev2.Fields{Opcode: rocev2.UDSendOnly, DestQP: b.qp.QPN(), QKey: testQKey ^ 1, SrcQP: 0x77}, []byte("hello"))
		}},
		{"truncated DETH", "rcvd_truncated", func(t *testing.T, x *attacker, b *dgNode) {
			fl := rocev2.Fields{Opcode: rocev2.UDSendOnly, PKey: 0xffff, DestQP: b.qp.QPN(), QKey: testQKey}
			p, _ := fl.Append(nil, nil)
			// BTH, half a DETH, an ICRC: shorter than the opcode's headers.
			p = append(p[:rocev2.BTHLen+4], 0, 0, 0, 0)
			x.sendRaw(t, &b.node, p)
		}},
		{"larger than the receive buffer", "rcvd_drop_len", func(t *testing.T, x *attacker, b *dgNode) {
			x.send(t, &b.node, rocev2.Fields{Opcode: rocev2.UDSendOnly, DestQP: b.qp.QPN(), QKey: testQKey, SrcQP: 0x77}, make([]byte, 129))
		}},
		{"an RC opcode", "rcvd_wrong_qp_type", func(t *testing.T, x *attacker, b *dgNode) {
			x.send(t, &b.node, rocev2.Fields{Opcode: rocev2.RCSendOnly, DestQP: b.qp.QPN()}, []byte("hello"))
		}},
		{"a UC WRITE", "rcvd_wrong_qp_type", func(t *testing.T, x *attacker, b *dgNode) {
			x.send(t, &b.node, rocev2.Fields{Opcode: rocev2.UCWriteOnly, DestQP: b.qp.QPN(), VA: b.mr.VA(), RKey: b.mr.RKey(), Len: 5}, []byte("hello"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newDgPair(t, dgConfig{typ: UD})
			x := newAttacker(t, &b.node, "127.0.0.66:4791")
			// The receive buffer holds the GRH area and 128 bytes.
			b.postRecv(t, 1, 0, rocev2.GRHLen+128)
			for i := range b.buf {
				b.buf[i] = 0xA5
			}
			before := b.snapshot()
			c0 := b.counter(t, tc.counter)
			tc.send(t, x, b)
			b.waitCounter(t, tc.counter, c0+1)
			requireNoWC(t, b.cq)
			require.Equal(t, before, b.buf, "memory changed")

			// The receive WQE is still there for the next message.
			_, err := a.qp.PostSend([]SendWR{a.udSend(2, b, 0, 128)})
			require.NoError(t, err)
			r := waitWCs(t, b.cq, 1, waitLimit)[0]
			assert.Equal(t, uint64(1), r.WRID)
			assert.Equal(t, cq.Success, r.Status)
		})
	}
}

// A UD packet with no receive posted is dropped and counted; one to a QP
// not yet in RTR likewise; neither is answered.
func TestUDNoReceiveOrNotReady(t *testing.T) {
	a, b := newDgPair(t, dgConfig{typ: UD})
	c0 := b.counter(t, "rcvd_drop_no_wqe")
	sent := b.dev.Counters.SentPkts.Load()
	_, err := a.qp.PostSend([]SendWR{a.udSend(1, b, 0, 8)})
	require.NoError(t, err)
	b.waitCounter(t, "rcvd_drop_no_wqe", c0+1)
	assert.Equal(t, sent, b.dev.Counters.SentPkts.Load(), "UD answers nothing")

	require.NoError(t, b.qp.Modify(&Attr{State: Reset}, MaskState))
	require.NoError(t, b.qp.Modify(&Attr{State: Init, Port: 1, QKey: testQKey}, MaskState|MaskPKeyIndex|MaskPort|MaskQKey))
	b.postRecv(t, 1, 0, 1024)
	s0 := b.counter(t, "rcvd_qp_state_drop")
	_, err = a.qp.PostSend([]SendWR{a.udSend(2, b, 0, 8)})
	require.NoError(t, err)
	b.waitCounter(t, "rcvd_qp_state_drop", s0+1)
	requireNoWC(t, b.cq)
}

// A UD QP takes datagrams from anyone with its Q_Key: a third party's
// packet arrives with the third party's address in the GRH area.
func TestUDTakesAnySender(t *testing.T) {
	_, b := newDgPair(t, dgConfig{typ: UD})
	x := newAttacker(t, &b.node, "127.0.0.66:4791")
	b.postRecv(t, 1, 0, 1024)
	x.send(t, &b.node, rocev2.Fields{Opcode: rocev2.UDSendOnlyImm, DestQP: b.qp.QPN(), QKey: testQKey, SrcQP: 0x77, Imm: 5, SE: true}, []byte("hello"))
	r := waitWCs(t, b.cq, 1, waitLimit)[0]
	assert.Equal(t, cq.WC{WRID: 1, Opcode: cq.OpRecv, Flags: cq.WithGRH | cq.WithImm, Imm: 5, ByteLen: rocev2.GRHLen + 5, QPNum: b.qp.QPN(), SrcQP: 0x77}, r)
	src, _, ok := rocev2.GRHSource(b.buf)
	require.True(t, ok)
	assert.Equal(t, netip.MustParseAddr("127.0.0.66"), src)
	assert.Equal(t, "hello", string(b.buf[rocev2.GRHLen:rocev2.GRHLen+5]))
}
