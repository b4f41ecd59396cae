package qp

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/faulty"
	"github.com/goroce/goroce/rocev2/device"
)

// UC SEND and RDMA WRITE, with and without immediate data, of one packet
// and of many, arrive whole; sends complete without any answer on the wire.
func TestUCSendAndWrite(t *testing.T) {
	a, b := newDgPair(t, dgConfig{typ: UC, mtu: rocev2.MTU1024})
	for i := range a.buf {
		a.buf[i] = byte(i*13 + 1)
	}
	for _, tc := range []struct {
		op   WROpcode
		size int
	}{
		{WRSend, 0}, {WRSend, 1}, {WRSend, 1024}, {WRSend, 1025}, {WRSend, 5000},
		{WRSendWithImm, 7}, {WRSendWithImm, 3000},
		{WRRDMAWrite, 0}, {WRRDMAWrite, 1000}, {WRRDMAWrite, 4096}, {WRRDMAWrite, 9999},
		{WRRDMAWriteWithImm, 0}, {WRRDMAWriteWithImm, 2049},
	} {
		clear(b.buf)
		consumes := tc.op != WRRDMAWrite
		if consumes {
			b.postRecv(t, 7, 0, 16384)
		}
		wr := SendWR{WRID: 9, Opcode: tc.op, Flags: SendSignaled, SGL: []SGE{a.sge(10, tc.size)}, Imm: 0x1234}
		dst := 0
		if tc.op.isWrite() {
			dst = 20000
			wr.RemoteAddr, wr.RKey = b.mr.VA()+uint64(dst), b.mr.RKey()
		}
		sent := b.dev.Counters.SentPkts.Load()
		wrs := []SendWR{wr}
		if !consumes {
			// An empty SEND after the WRITE: its receive completion
			// says the WRITE is placed (UC keeps order).
			b.postRecv(t, 8, 0, 16)
			wrs = append(wrs, SendWR{WRID: 10, Opcode: WRSend})
		}
		_, err := a.qp.PostSend(wrs)
		require.NoError(t, err)
		s := waitWCs(t, a.cq, 1, waitLimit)[0]
		assert.Equal(t, cq.WC{WRID: 9, Opcode: tc.op.wcOpcode(), ByteLen: uint32(tc.size), QPNum: a.qp.QPN(), SrcQP: b.qp.QPN()}, s)
		if consumes {
			r := waitWCs(t, b.cq, 1, waitLimit)[0]
			want := cq.WC{WRID: 7, Opcode: cq.OpRecv, ByteLen: uint32(tc.size), QPNum: b.qp.QPN(), SrcQP: a.qp.QPN()}
			if tc.op == WRRDMAWriteWithImm {
				want.Opcode = cq.OpRecvRDMAWithImm
			}
			if tc.op != WRSend {
				want.Flags, want.Imm = cq.WithImm, 0x1234
			}
			assert.Equal(t, want, r, "%v %d", tc.op, tc.size)
		} else {
			assert.Equal(t, uint64(8), waitWCs(t, b.cq, 1, waitLimit)[0].WRID)
		}
		assert.Equal(t, a.buf[10:10+tc.size], b.buf[dst:dst+tc.size], "%v %d", tc.op, tc.size)
		assert.Equal(t, sent, b.dev.Counters.SentPkts.Load(), "UC answers nothing")
	}
	_, err := a.qp.PostSend([]SendWR{{Opcode: WRRDMARead, SGL: []SGE{a.sge(0, 8)}, RemoteAddr: b.mr.VA(), RKey: b.mr.RKey()}})
	assert.ErrorIs(t, err, ErrBadWR, "UC has no READ")
}

// ucPacket builds the fields of a UC packet to b's QP.
func ucPacket(b *dgNode, op rocev2.Opcode, psn rocev2.PSN) rocev2.Fields {
	return rocev2.Fields{Opcode: op, DestQP: b.qp.QPN(), PSN: psn}
}

// Every remote-input rule of the UC responder, with hostile packets from
// the peer's address (a third party's would not get past the address
// check): the offending message is dropped and counted, memory it was not
// allowed to touch is unchanged, and the next message starts clean in the
// same receive WQE.
func TestUCHostilePackets(t *testing.T) {
	const mtu = 256
	for _, tc := range []struct {
		name    string
		counter string
		send    func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN)
	}{
		{"out-of-sequence middle packet", "rcvd_drop_seq", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendFirst, e), bytesOf(mtu, 1))
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendMiddle, e.Add(2)), bytesOf(mtu, 2)) // e+1 lost
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendLast, e.Add(3)), bytesOf(10, 3))
		}},
		{"middle packet without a first", "rcvd_drop_seq", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendMiddle, e), bytesOf(mtu, 2))
		}},
		{"write middle packet without a first", "rcvd_drop_seq", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			x.send(t, &b.node, ucPacket(b, rocev2.UCWriteLast, e), bytesOf(16, 2))
		}},
		{"write with a bad rkey", "rcvd_drop_access", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			fl := ucPacket(b, rocev2.UCWriteOnly, e)
			fl.VA, fl.RKey, fl.Len = b.mr.VA()+4096, b.mr.RKey()^0x100, 16
			x.send(t, &b.node, fl, bytesOf(16, 4))
		}},
		{"write past the region", "rcvd_drop_access", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			fl := ucPacket(b, rocev2.UCWriteOnly, e)
			fl.VA, fl.RKey, fl.Len = b.mr.VA()+uint64(len(b.buf))-8, b.mr.RKey(), 16
			x.send(t, &b.node, fl, bytesOf(16, 4))
		}},
		{"send larger than the receive buffer", "rcvd_drop_len", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendFirst, e), bytesOf(mtu, 1))
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendMiddle, e.Add(1)), bytesOf(mtu, 2))
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendLast, e.Add(2)), bytesOf(1, 3)) // 513 > 512
		}},
		{"first packet shorter than the MTU", "rcvd_drop_len", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendFirst, e), bytesOf(mtu-1, 1))
		}},
		{"last packet with no payload", "rcvd_drop_len", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendFirst, e), bytesOf(mtu, 1))
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendLast, e.Add(1)), nil)
		}},
		{"only packet longer than the MTU", "rcvd_drop_len", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			x.send(t, &b.node, ucPacket(b, rocev2.UCSendOnly, e), bytesOf(mtu+4, 1))
		}},
		{"write longer than its RETH says", "rcvd_drop_len", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			fl := ucPacket(b, rocev2.UCWriteOnly, e)
			fl.VA, fl.RKey, fl.Len = b.mr.VA()+4096, b.mr.RKey(), 8
			x.send(t, &b.node, fl, bytesOf(16, 4))
		}},
		{"an RC opcode", "rcvd_wrong_qp_type", func(t *testing.T, x *attacker, b *dgNode, e rocev2.PSN) {
			fl := rocev2.Fields{Opcode: rocev2.RCWriteOnly, DestQP: b.qp.QPN(), PSN: e, VA: b.mr.VA() + 4096, RKey: b.mr.RKey(), Len: 16}
			x.send(t, &b.node, fl, bytesOf(16, 4))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newDgPair(t, dgConfig{typ: UC, mtu: rocev2.MTU256})
			// From the peer's IP address (another UDP port): past the
			// address check, as a spoofer on the path would be.
			x := newAttacker(t, &b.node, "127.0.0.1:9999")
			b.postRecv(t, 1, 0, 2*mtu)
			for i := range b.buf {
				b.buf[i] = 0xA5
			}
			before := b.snapshot()
			c0 := b.counter(t, tc.counter)
			tc.send(t, x, b, b.psn)
			b.waitCounter(t, tc.counter, c0+1)
			requireNoWC(t, b.cq)
			// Nothing beyond the receive buffer changed (a SEND's first
			// packets may have landed in it), and no write landed.
			require.Equal(t, before[2*mtu:], b.buf[2*mtu:], "memory changed")

			// The next message starts clean, whatever the PSN, in the
			// same receive WQE.
			for i := range a.buf[:300] {
				a.buf[i] = byte(i)
			}
			_, err := a.qp.PostSend([]SendWR{{WRID: 2, Opcode: WRSend, SGL: []SGE{a.sge(0, 300)}}})
			require.NoError(t, err)
			r := waitWCs(t, b.cq, 1, waitLimit)[0]
			assert.Equal(t, cq.WC{WRID: 1, Opcode: cq.OpRecv, ByteLen: 300, QPNum: b.qp.QPN(), SrcQP: a.qp.QPN()}, r)
			assert.Equal(t, a.buf[:300], b.buf[:300])
		})
	}
}

// A UC QP takes packets only from its peer's address, and none at all
// before RTR; a SEND with no receive posted is dropped.
func TestUCAddressStateAndRNR(t *testing.T) {
	a, b := newDgPair(t, dgConfig{typ: UC, mtu: rocev2.MTU256})
	x := newAttacker(t, &b.node, "127.0.0.66:4791")
	b.postRecv(t, 1, 0, 1024)
	c0 := b.counter(t, "rcvd_addr_err")
	x.send(t, &b.node, ucPacket(b, rocev2.UCSendOnly, b.psn), bytesOf(8, 1))
	b.waitCounter(t, "rcvd_addr_err", c0+1)
	requireNoWC(t, b.cq)

	// Without a receive WQE (the one posted is used up first).
	_, err := a.qp.PostSend([]SendWR{{WRID: 2, Opcode: WRSend, SGL: []SGE{a.sge(0, 8)}}})
	require.NoError(t, err)
	waitWCs(t, b.cq, 1, waitLimit)
	n0, d0 := b.counter(t, "rcvd_drop_no_wqe"), b.counter(t, "rcvd_drop_seq")
	_, err = a.qp.PostSend([]SendWR{{WRID: 3, Opcode: WRSend, SGL: []SGE{a.sge(0, 600)}}})
	require.NoError(t, err)
	b.waitCounter(t, "rcvd_drop_no_wqe", n0+1)
	// The rest of that message (600 bytes: 3 packets) is dropped too.
	b.waitCounter(t, "rcvd_drop_seq", d0+2)

	// WRITE to a QP without remote write access.
	require.NoError(t, b.qp.Modify(&Attr{State: RTS, AccessFlags: device.AccessLocalWrite}, MaskState|MaskAccessFlags))
	before := b.snapshot()
	w0 := b.counter(t, "rcvd_drop_access")
	_, err = a.qp.PostSend([]SendWR{{WRID: 4, Opcode: WRRDMAWrite, SGL: []SGE{a.sge(0, 64)}, RemoteAddr: b.mr.VA(), RKey: b.mr.RKey()}})
	require.NoError(t, err)
	b.waitCounter(t, "rcvd_drop_access", w0+1)
	require.Equal(t, before, b.buf)
}

// bytesOf returns n bytes of v.
func bytesOf(n int, v byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = v
	}
	return b
}

// Under loss, duplication and reordering a UC stream loses messages but
// never delivers a broken one: every receive completion holds one whole
// message, in order, and duplicates of a delivered message are not
// delivered again.
func TestUCUnderFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  faulty.Config
	}{
		{"loss", faulty.Config{Seed: 1, Loss: 0.1}},
		{"duplication", faulty.Config{Seed: 2, Duplicate: 0.1}},
		{"reordering", faulty.Config{Seed: 3, Reorder: 0.1}},
		{"corruption", faulty.Config{Seed: 4, Corrupt: 0.1}},
		{"everything", faulty.Config{Seed: 5, Loss: 0.05, Duplicate: 0.05, Reorder: 0.05, Corrupt: 0.05}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			a, b := newDgPair(t, dgConfig{typ: UC, mtu: rocev2.MTU256, depth: 256, bufSize: 256 * 1024,
				wrap: func(be backend.Backend) backend.Backend { return faulty.Wrap(be, cfg).Backend() }})
			const msgs, size = 400, 700 // 3 packets each
			for i := range 256 {
				b.postRecv(t, uint64(i), i*1024, 1024)
			}
			wcs := make([]cq.WC, 64)
			last, got := -1, 0
			for i := range msgs {
				binary.BigEndian.PutUint32(a.buf[0:], uint32(i))
				for j := 4; j < size; j++ {
					a.buf[j] = byte(i + j)
				}
				// UC builds every packet before PostSend returns: a.buf
				// may change after it.
				_, err := a.qp.PostSend([]SendWR{{WRID: uint64(i), Opcode: WRSend, SGL: []SGE{a.sge(0, size)}}})
				require.NoError(t, err)
				for n := b.cq.Poll(wcs); n > 0; n = b.cq.Poll(wcs) {
					for _, wc := range wcs[:n] {
						got++
						require.Equal(t, cq.Success, wc.Status)
						require.Equal(t, uint32(size), wc.ByteLen)
						off := int(wc.WRID) * 1024
						m := int(binary.BigEndian.Uint32(b.buf[off:]))
						require.Greater(t, m, last, "messages out of order or duplicated")
						last = m
						for j := 4; j < size; j++ {
							require.Equal(t, byte(m+j), b.buf[off+j], "message %d byte %d", m, j)
						}
						b.postRecv(t, wc.WRID, off, 1024)
					}
				}
			}
			if got == 0 { // the last ones may still be on their way
				got += len(waitWCs(t, b.cq, 1, waitLimit))
			}
			require.Positive(t, got)
		})
	}
}
