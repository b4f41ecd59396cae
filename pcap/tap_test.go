package pcap_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/race"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/backendtest"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

const allAccess = device.AccessLocalWrite | device.AccessRemoteWrite | device.AccessRemoteRead | device.AccessRemoteAtomic

// tapNode is one side of the tapped connection: a device whose backend is
// a Tap writing into capture.
type tapNode struct {
	dev     *device.Device
	tap     *pcap.Tap
	w       *pcap.Writer
	capture bytes.Buffer
	cq      *cq.CQ
	qp      *qp.QP
	buf     []byte
	mr      *device.MR
	psn     rocev2.PSN
}

func newTapNode(t *testing.T, n *memlink.Network, addr string) *tapNode {
	t.Helper()
	be, err := n.Attach(netip.MustParseAddrPort(addr))
	require.NoError(t, err)
	nd := &tapNode{buf: make([]byte, 64<<10), psn: qp.RandomPSN()}
	nd.w, err = pcap.NewWriter(&nd.capture, pcap.WriterOptions{Description: "goroce over memlink " + addr})
	require.NoError(t, err)
	nd.tap = pcap.NewTap(be, nd.w)
	nd.dev, err = device.New(device.Config{Backend: nd.tap.Backend()})
	require.NoError(t, err)
	t.Cleanup(func() { nd.dev.Close() })
	pd := nd.dev.AllocPD()
	nd.mr, err = pd.RegisterMR(nd.buf, allAccess)
	require.NoError(t, err)
	nd.cq, err = cq.New(256, cq.Config{})
	require.NoError(t, err)
	nd.qp, err = qp.Create(pd, qp.InitAttr{
		Type: qp.RC, SendCQ: nd.cq, RecvCQ: nd.cq,
		Cap: qp.Cap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	require.NoError(t, err)
	return nd
}

// connect moves n's QP to RTS towards peer (INIT → RTR → RTS).
func (n *tapNode) connect(t *testing.T, peer *tapNode) {
	t.Helper()
	gid, err := peer.dev.GID(1)
	require.NoError(t, err)
	require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, AccessFlags: allAccess},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags))
	require.NoError(t, n.qp.Modify(&qp.Attr{
		State: qp.RTR, PathMTU: rocev2.MTU1024, DestQPN: peer.qp.QPN(), RQPSN: peer.psn,
		MaxDestRdAtomic: 4, MinRNRTimer: 12,
		AH: qp.AH{DGID: gid, SGIDIndex: 1, HopLimit: 64, DestPort: peer.dev.LocalAddr().Port()},
	}, qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer))
	require.NoError(t, n.qp.Modify(&qp.Attr{
		State: qp.RTS, SQPSN: n.psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4,
	}, qp.MaskState|qp.MaskSQPSN|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|qp.MaskMaxQPRdAtomic))
}

func (n *tapNode) sge(off, length int) []qp.SGE {
	return []qp.SGE{{Addr: n.mr.VA() + uint64(off), Length: uint32(length), LKey: n.mr.LKey()}}
}

// waitWCs collects want successful completions from c.
func waitWCs(t *testing.T, c *cq.CQ, want int) []cq.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []cq.WC
	buf := make([]cq.WC, 16)
	for len(out) < want {
		n := c.Poll(buf)
		out = append(out, buf[:n]...)
		if n > 0 || c.Arm(false) {
			continue
		}
		require.NoError(t, c.Wait(ctx), "waiting for %d completions, got %d", want, len(out))
	}
	for _, wc := range out {
		require.Equal(t, cq.Success, wc.Status, "%+v", wc)
	}
	return out
}

// Every packet two tapped devices exchange over RC is in their captures,
// framed so that its ICRC verifies, in both directions, and the counts
// match the devices' counters.
func TestTapRecordsVerifiableTraffic(t *testing.T) {
	network := memlink.NewNetwork()
	a := newTapNode(t, network, "127.0.0.1:4791")
	b := newTapNode(t, network, "127.0.0.2:4791")
	a.connect(t, b)
	b.connect(t, a)

	// A SEND and a multi-packet WRITE with immediate, a READ and both
	// atomics: requests, ACKs, read and atomic responses.
	for i := range a.buf[:8192] {
		a.buf[i] = byte(i * 7)
	}
	binary.NativeEndian.PutUint64(b.buf[16<<10:], 40)
	_, err := b.qp.PostRecv([]qp.RecvWR{{WRID: 1, SGL: b.sge(0, 8192)}, {WRID: 2, SGL: b.sge(0, 8192)}})
	require.NoError(t, err)
	remote := func(off int) uint64 { return b.mr.VA() + uint64(off) }
	_, err = a.qp.PostSend([]qp.SendWR{
		{WRID: 10, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: a.sge(0, 100)},
		{WRID: 11, Opcode: qp.WRRDMAWriteWithImm, Flags: qp.SendSignaled, SGL: a.sge(0, 5000), RemoteAddr: remote(8192), RKey: b.mr.RKey(), Imm: 7},
		{WRID: 12, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled, SGL: a.sge(32<<10, 3000), RemoteAddr: remote(8192), RKey: b.mr.RKey()},
		{WRID: 13, Opcode: qp.WRAtomicFetchAdd, Flags: qp.SendSignaled, SGL: a.sge(40<<10, 8), RemoteAddr: remote(16 << 10), RKey: b.mr.RKey(), CompareAdd: 2},
		{WRID: 14, Opcode: qp.WRAtomicCmpAndSwp, Flags: qp.SendSignaled, SGL: a.sge(40<<10+8, 8), RemoteAddr: remote(16 << 10), RKey: b.mr.RKey(), CompareAdd: 42, Swap: 1},
	})
	require.NoError(t, err)
	waitWCs(t, a.cq, 5)
	waitWCs(t, b.cq, 2)
	assert.Equal(t, a.buf[:3000], a.buf[32<<10:32<<10+3000], "READ returned the WRITE's data")
	assert.Equal(t, uint64(1), binary.NativeEndian.Uint64(b.buf[16<<10:]), "both atomics ran")

	// Closing the devices stops every sender, so the counters are final.
	require.NoError(t, a.dev.Close())
	require.NoError(t, b.dev.Close())
	for _, n := range []*tapNode{a, b} {
		require.NoError(t, n.w.Close())
		require.NoError(t, n.tap.Err())
	}

	for _, tc := range []struct {
		name       string
		n, peer    *tapNode
		local, rem string
	}{{"a", a, b, "127.0.0.1", "127.0.0.2"}, {"b", b, a, "127.0.0.2", "127.0.0.1"}} {
		t.Run(tc.name, func(t *testing.T) {
			out, in := verifyCapture(t, tc.n.capture.Bytes(), tc.local, tc.rem)
			sent := tc.n.dev.Counters.SentPkts.Load()
			assert.NotZero(t, sent)
			assert.Equal(t, sent, out, "outbound packets = sent_pkts")
			assert.Equal(t, tc.peer.dev.Counters.SentPkts.Load(), in, "inbound packets = the peer's sent_pkts (memlink loses nothing)")
			assert.Equal(t, tc.n.dev.Counters.RcvdPkts.Load(), in, "every inbound packet was delivered")
			st := tc.n.tap.Stats()
			assert.Equal(t, pcap.TapStats{Outbound: out, Inbound: in}, st)
		})
	}
}

// verifyCapture decodes every frame: each must be RoCEv2 between the two
// hosts, in the direction its addresses say, with an ICRC that verifies.
func verifyCapture(t *testing.T, capture []byte, local, remote string) (out, in uint64) {
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
		ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		src, dst := ip.SrcIP.String(), ip.DstIP.String()
		switch rec.Direction {
		case pcap.Outbound:
			out++
			assert.Equal(t, []string{local, remote}, []string{src, dst}, "frame %d", i)
		case pcap.Inbound:
			in++
			assert.Equal(t, []string{remote, local}, []string{src, dst}, "frame %d", i)
		default:
			t.Fatalf("frame %d has no direction", i)
		}
		assert.Empty(t, rec.Comment, "frame %d", i)
	}
}

// sealer is a minimal backend for the allocation test: it seals like the
// UDP backend's GSO path (IDs 0, 1, 2, …) and hands the same packets back.
type sealer struct {
	local netip.AddrPort
	rx    []backend.Incoming
}

func (s *sealer) Send(pkts []backend.Outgoing) error {
	for i := range pkts {
		fl := rocev2.NewFlow(s.local, pkts[i].Dst)
		fl.IPv4ID = uint16(i)
		fl.SealICRC(pkts[i].Buf)
		pkts[i].Wire.IPv4ID = fl.IPv4ID
	}
	return nil
}

func (s *sealer) Receive(pkts []backend.Incoming) (int, error) {
	return copy(pkts, s.rx), nil
}

func (s *sealer) LocalAddr() netip.AddrPort { return s.local }
func (s *sealer) BatchSize() int            { return 8 }
func (s *sealer) LinkMTU() int              { return 1500 }
func (s *sealer) Close() error              { return nil }

// Recording a sent and a received batch does not allocate, and sealed IDs
// other than 0 frame correctly.
func TestTapDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	local, peer := netip.MustParseAddrPort("10.0.0.1:4791"), netip.MustParseAddrPort("10.0.0.2:4791")
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11}
	batch := make([]backend.Outgoing, 4)
	for i := range batch {
		buf, err := f.Append(nil, make([]byte, 64*i))
		require.NoError(t, err)
		batch[i] = backend.Outgoing{Buf: buf, Dst: peer}
	}
	be := &sealer{local: local}
	var capture bytes.Buffer
	w, err := pcap.NewWriter(&capture, pcap.WriterOptions{})
	require.NoError(t, err)
	tap := pcap.NewTap(be, w)
	require.NoError(t, tap.Send(batch))
	for i, d := range batch {
		// What the peer sent us: sealed for peer→local, GSO segment i.
		buf := append([]byte(nil), d.Buf...)
		fl := rocev2.NewFlow(peer, local)
		fl.IPv4ID = uint16(i)
		fl.SealICRC(buf)
		be.rx = append(be.rx, backend.Incoming{Buf: buf, Src: peer, IPv4ID: uint16(i), ICRC: backend.ICRCOK})
	}
	rx := make([]backend.Incoming, 8)
	n, err := tap.Receive(rx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.NoError(t, w.Flush())
	out, in := verifyCapture(t, capture.Bytes(), "10.0.0.1", "10.0.0.2")
	assert.Equal(t, []uint64{4, 4}, []uint64{out, in})

	w2, err := pcap.NewWriter(io.Discard, pcap.WriterOptions{})
	require.NoError(t, err)
	tap = pcap.NewTap(be, w2)
	allocs := testing.AllocsPerRun(100, func() {
		_ = tap.Send(batch)
		_, _ = tap.Receive(rx)
	})
	assert.Zero(t, allocs)
}

// pollingSealer is a sealer that can also receive without blocking.
type pollingSealer struct{ sealer }

// Serve drains once and ends, as if the backend then closed.
func (p *pollingSealer) Serve(drain func() bool) error {
	for drain() {
	}
	return backend.ErrBackendClosed
}
func (p *pollingSealer) TryReceive(pkts []backend.Incoming) (int, error) {
	n := copy(pkts, p.rx)
	p.rx = p.rx[n:]
	return n, nil
}

// A Tap keeps the inner backend's non-blocking receive, and records what
// it receives through it.
func TestTapBackendKeepsPoller(t *testing.T) {
	local, peer := netip.MustParseAddrPort("10.0.0.1:4791"), netip.MustParseAddrPort("10.0.0.2:4791")
	w, err := pcap.NewWriter(io.Discard, pcap.WriterOptions{})
	require.NoError(t, err)

	plain := pcap.NewTap(&sealer{local: local}, w)
	assert.Same(t, plain, plain.Backend(), "a blocking backend stays blocking")
	_, isPoller := plain.Backend().(backend.Poller)
	assert.False(t, isPoller)

	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11}
	pkt, err := f.Append(nil, []byte("hi"))
	require.NoError(t, err)
	tap := pcap.NewTap(&pollingSealer{sealer{local: local, rx: []backend.Incoming{{Buf: pkt, Src: peer, ICRC: backend.ICRCBad}}}}, w)
	p, ok := tap.Backend().(backend.Poller)
	require.True(t, ok, "a polling backend stays polling")
	var n int
	require.ErrorIs(t, p.Serve(func() bool {
		k, err := p.TryReceive(make([]backend.Incoming, 4))
		require.NoError(t, err)
		n += k
		return false
	}), backend.ErrBackendClosed, "Serve is the inner backend's")
	assert.Equal(t, 1, n, "drained through the tap")
	n, err = p.TryReceive(make([]backend.Incoming, 4))
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, pcap.TapStats{Inbound: 1}, tap.Stats())
	assert.Equal(t, local, tap.Backend().LocalAddr())
}

// A packet the backend found bad is recorded with a comment, and one whose
// ICRC the backend did not check is framed with the ID the ICRC implies.
func TestTapMarksReceiveVerdicts(t *testing.T) {
	local, peer := netip.MustParseAddrPort("10.0.0.1:4791"), netip.MustParseAddrPort("10.0.0.2:4791")
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11}
	good, err := f.Append(nil, []byte("hello"))
	require.NoError(t, err)
	fl := rocev2.NewFlow(peer, local)
	fl.IPv4ID = 3
	fl.SealICRC(good)
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1
	be := &sealer{local: local, rx: []backend.Incoming{
		{Buf: good, Src: peer}, // unchecked: the Tap infers ID 3
		{Buf: bad, Src: peer, ICRC: backend.ICRCBad},
	}}
	var capture bytes.Buffer
	w, err := pcap.NewWriter(&capture, pcap.WriterOptions{})
	require.NoError(t, err)
	n, err := pcap.NewTap(be, w).Receive(make([]backend.Incoming, 4))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.NoError(t, w.Close())

	r, err := pcap.NewReader(bytes.NewReader(capture.Bytes()))
	require.NoError(t, err)
	for i, want := range []bool{true, false} {
		rec, err := r.Next()
		require.NoError(t, err)
		ok, verifiable := pcap.VerifyICRC(gopacket.NewPacket(rec.Data, layers.LayerTypeEthernet, gopacket.Default))
		require.True(t, verifiable)
		assert.Equal(t, want, ok, "packet %d", i)
		assert.Equal(t, pcap.Inbound, rec.Direction)
		if want {
			assert.Empty(t, rec.Comment)
		} else {
			assert.Contains(t, rec.Comment, "ICRC bad")
		}
	}
}

func TestTapSharedBackendChecks(t *testing.T) {
	n := memlink.NewNetwork()
	be, err := n.Attach(netip.MustParseAddrPort("198.18.0.2:4791"))
	require.NoError(t, err)
	w, err := pcap.NewWriter(io.Discard, pcap.WriterOptions{})
	require.NoError(t, err)
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11}
	pkt, err := f.Append(nil, []byte("x"))
	require.NoError(t, err)
	backendtest.Run(t, pcap.NewTap(be, w), []backend.Outgoing{{Buf: pkt, Dst: netip.MustParseAddrPort("198.18.0.1:4791")}})
}
