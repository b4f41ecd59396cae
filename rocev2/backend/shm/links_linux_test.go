package shm_test

import (
	"bytes"
	"io"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/backendtest"
	"github.com/goroce/goroce/rocev2/backend/shm"
	"github.com/goroce/goroce/rocev2/backend/udp"
)

func TestBackendChecks(t *testing.T) {
	dir := runDir(t)
	for _, tc := range []struct {
		name     string
		fallback bool
	}{{"alone", false}, {"with a UDP fallback", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := shm.Config{Dir: dir, Addr: netip.MustParseAddrPort("127.0.0.1:4791")}
			if tc.fallback {
				fb, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
				require.NoError(t, err)
				cfg.Addr, cfg.Fallback = netip.AddrPort{}, fb
			}
			b, err := shm.Open(cfg)
			require.NoError(t, err)
			pkts := []backend.Outgoing{{Buf: make([]byte, 64), Dst: netip.MustParseAddrPort("127.0.0.9:4791")}}
			backendtest.Run(t, b, pkts)
		})
	}
}

// exchange runs a WRITE, a SEND and a READ from a to b, checking the bytes.
func exchange(t *testing.T, a, b *node, size int, seed uint64) {
	t.Helper()
	fill(a.buf[:size], seed)
	fill(b.buf[2*size:3*size], seed+1)
	b.postRecv(t, 1, size, 64)
	_, err := a.qp.PostSend([]qp.SendWR{
		{WRID: 1, Opcode: qp.WRRDMAWrite, SGL: []qp.SGE{a.sge(0, size)}, RemoteAddr: b.mr.VA(), RKey: b.mr.RKey()},
		{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 64)}},
		{WRID: 3, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(size, size)}, RemoteAddr: b.mr.VA() + uint64(2*size), RKey: b.mr.RKey()},
	})
	require.NoError(t, err)
	for _, wc := range waitWC(t, a.cq, 2) {
		require.Equal(t, cq.Success, wc.Status, "%+v", wc)
	}
	require.Equal(t, cq.Success, waitWC(t, b.cq, 1)[0].Status)
	require.True(t, bytes.Equal(a.buf[:size], b.buf[:size]), "WRITE data")
	require.True(t, bytes.Equal(a.buf[size:2*size], b.buf[2*size:3*size]), "READ data")
}

// One device, both links: a peer with a rendezvous socket gets shared
// memory, a plain UDP peer gets the fallback, and the device receives from
// both through its one backend.
func TestFallback(t *testing.T) {
	dir := runDir(t)
	fa, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	ba, err := shm.Open(shm.Config{Dir: dir, Fallback: fa})
	require.NoError(t, err)
	fb, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	require.NoError(t, err)
	bb, err := shm.Open(shm.Config{Dir: dir, Fallback: fb})
	require.NoError(t, err)
	bc, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.3:0")})
	require.NoError(t, err)

	cfg := nodeConfig{typ: qp.RC, bufSize: 1 << 18}
	devA := newDevice(t, ba)
	toB, toC := newNodeOn(t, devA, cfg), newNodeOn(t, devA, cfg)
	b, c := newNode(t, bb, cfg), newNode(t, bc, cfg)
	toB.connect(t, b, cfg)
	b.connect(t, toB, cfg)
	toC.connect(t, c, cfg)
	c.connect(t, toC, cfg)
	for round := range 3 {
		exchange(t, toB, b, 1<<16, uint64(round))
		exchange(t, toC, c, 1<<16, uint64(round)+10)
		exchange(t, b, toB, 1<<14, uint64(round)+20)
		exchange(t, c, toC, 1<<14, uint64(round)+30)
	}
	assert.Equal(t, shm.LinkShm, ba.LinkTo(bb.LocalAddr()))
	assert.Equal(t, shm.LinkFallback, ba.LinkTo(bc.LocalAddr()))
	assert.Equal(t, shm.LinkShm, bb.LinkTo(ba.LocalAddr()))
	sa, sb := ba.Stats(), bb.Stats()
	assert.Positive(t, sa.Fallback, "A sent to C through UDP")
	assert.Positive(t, sa.SentPackets, "A sent to B through shared memory")
	assert.Positive(t, sa.ReceivedPackets, "A received from B through shared memory")
	assert.Zero(t, sb.Fallback, "B sent nothing through UDP: %+v", sb)
	assert.EqualValues(t, 1, sa.FailedRendezvous, "C was tried once (RetryAfter has not passed)")
	assert.Zero(t, sa.Dropped+sb.Dropped)
}

// A bulk transfer through a ring that holds four full packets: the private
// queue takes what the ring cannot, the consumer's doorbell moves it on,
// and nothing is dropped or sent twice.
func TestBackPressure(t *testing.T) {
	const size = 4 << 20
	cfg := nodeConfig{typ: qp.RC, bufSize: 3 * size}
	tiny := shm.Config{RingSize: 16 << 10}
	a, b, ba, bb := pairNodes(t, cfg, tiny, tiny)
	exchange(t, a, b, size, 1)
	exchange(t, b, a, size, 2)
	for _, be := range []*shm.Backend{ba, bb} {
		s := be.Stats()
		assert.Positive(t, s.Overflow, "the ring was full: %+v", s)
		assert.Zero(t, s.Dropped, "%+v", s)
	}
	assert.Zero(t, a.dev.Counters.RetransmittedPkts.Load()+b.dev.Counters.RetransmittedPkts.Load(), "retransmitted")
}

// Every packet a capture tap records over shared memory is a valid RoCEv2
// packet whose ICRC verifies, as over UDP.
func TestCaptureVerifies(t *testing.T) {
	dir := runDir(t)
	var caps [2]bytes.Buffer
	var taps [2]*pcap.Tap
	var ws [2]*pcap.Writer
	var nodes [2]*node
	cfg := nodeConfig{typ: qp.RC, bufSize: 1 << 18}
	for i, addr := range []string{"127.0.0.1:4791", "127.0.0.2:4791"} {
		w, err := pcap.NewWriter(&caps[i], pcap.WriterOptions{Description: "goroce over shm " + addr})
		require.NoError(t, err)
		ws[i] = w
		taps[i] = pcap.NewTap(openShm(t, dir, addr, shm.Config{}), w)
		nodes[i] = newNode(t, taps[i].Backend(), cfg)
	}
	nodes[0].connect(t, nodes[1], cfg)
	nodes[1].connect(t, nodes[0], cfg)
	exchange(t, nodes[0], nodes[1], 1<<15, 3)
	nodes[0].dev.Close()
	nodes[1].dev.Close()
	for i := range taps {
		require.NoError(t, ws[i].Flush())
		require.NoError(t, taps[i].Err())
		st := taps[i].Stats()
		out, in := verifyCapture(t, caps[i].Bytes())
		assert.Equal(t, st.Outbound, out)
		assert.Equal(t, st.Inbound, in)
		assert.Positive(t, out)
		assert.Positive(t, in)
	}
}

// verifyCapture decodes every frame of a capture: each must be a complete
// RoCEv2 packet whose ICRC verifies.
func verifyCapture(t *testing.T, capture []byte) (out, in uint64) {
	t.Helper()
	r, err := pcap.NewReader(bytes.NewReader(capture))
	require.NoError(t, err)
	for i := 1; ; i++ {
		rec, err := r.Next()
		if err == io.EOF {
			return out, in
		}
		require.NoError(t, err)
		p := gopacket.NewPacket(rec.Data, layers.LayerTypeEthernet, gopacket.Default)
		ok, verifiable := pcap.VerifyICRC(p)
		require.True(t, verifiable, "frame %d is not a complete RoCEv2 packet", i)
		require.True(t, ok, "frame %d: ICRC does not verify", i)
		assert.Empty(t, rec.Comment, "frame %d", i)
		if rec.Direction == pcap.Outbound {
			out++
		} else {
			in++
		}
	}
}

// A peer that goes away: its pairing is torn down, our QP's sends to it
// end in retry exhaustion within its budget, and a new device on the same
// address pairs anew.
func TestPeerGone(t *testing.T) {
	dir := runDir(t)
	ba := openShm(t, dir, "127.0.0.1:4791", shm.Config{})
	// A 16.8 ms ACK timeout and seven retries: the dead peer is noticed
	// within about 135 ms, and the exchange before it survives a busy
	// machine's late goroutines (with 1 ms and two retries it did not).
	cfg := nodeConfig{typ: qp.RC, timeout: 12, retry: 7}
	devA := newDevice(t, ba)
	a := newNodeOn(t, devA, cfg)
	b := newNode(t, openShm(t, dir, "127.0.0.2:4791", shm.Config{}), cfg)
	a.connect(t, b, cfg)
	b.connect(t, a, cfg)
	exchange(t, a, b, 1<<12, 1)
	require.Equal(t, shm.LinkShm, ba.LinkTo(b.dev.LocalAddr()))

	b.dev.Close()
	_, err := a.qp.PostSend([]qp.SendWR{{WRID: 9, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 64)}}})
	require.NoError(t, err)
	wc := waitWC(t, a.cq, 1)[0]
	assert.Equal(t, cq.RetryExcErr, wc.Status, "%+v", wc)
	assert.Equal(t, shm.LinkNone, ba.LinkTo(b.dev.LocalAddr()))
	s := ba.Stats()
	assert.Zero(t, s.Paired, "%+v", s)
	assert.Positive(t, s.Dropped, "packets to the dead peer are dropped: %+v", s)

	// A new device on B's address: it sends first, so it dials, and A
	// pairs with it although A's RetryAfter for that address runs.
	b2 := newNode(t, openShm(t, dir, "127.0.0.2:4791", shm.Config{}), cfg)
	a2 := newNodeOn(t, devA, cfg)
	a2.connect(t, b2, cfg)
	b2.connect(t, a2, cfg)
	exchange(t, b2, a2, 1<<12, 2)
	assert.Equal(t, shm.LinkShm, ba.LinkTo(b2.dev.LocalAddr()))
	assert.EqualValues(t, 2, ba.Stats().Pairings)
}
