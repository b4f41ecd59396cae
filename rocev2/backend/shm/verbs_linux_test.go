package shm_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/shm"
	"github.com/goroce/goroce/rocev2/device"
)

// Devices and queue pairs over the shared-memory backend, as the qp
// package's own tests build them over memlink: every RC operation, UD and
// shared receive queues.

const (
	allAccess = device.AccessLocalWrite | device.AccessRemoteWrite | device.AccessRemoteRead | device.AccessRemoteAtomic
	qkey      = 0x11111111
	// hangGuard bounds every wait for completions; nothing is timed.
	hangGuard = 60 * time.Second
)

// runDir returns a run directory of the test's own, mode 0700.
var runDir = shm.NewRunDir

// openShm opens a shared-memory backend on addr in dir.
func openShm(t testing.TB, dir, addr string, cfg shm.Config) *shm.Backend {
	t.Helper()
	cfg.Dir = dir
	if addr != "" {
		cfg.Addr = netip.MustParseAddrPort(addr)
	}
	b, err := shm.Open(cfg)
	require.NoError(t, err)
	return b
}

// node is a device with a PD, one CQ, one QP (on an SRQ if asked) and a
// registered buffer.
type node struct {
	dev *device.Device
	pd  *device.PD
	cq  *cq.CQ
	qp  *qp.QP
	srq *qp.SRQ
	ah  *qp.AddressHandle
	typ qp.Type
	buf []byte
	mr  *device.MR
	psn rocev2.PSN
}

type nodeConfig struct {
	typ     qp.Type
	srq     bool
	bufSize int
	timeout uint8 // local ACK timeout code (RC); 0 means 20 (4.3 s): nothing is lost
	retry   uint8 // 0 means 7
}

func newNode(t testing.TB, be backend.Backend, cfg nodeConfig) *node {
	t.Helper()
	return newNodeOn(t, newDevice(t, be), cfg)
}

// newDevice starts a device on be; the test's cleanup closes it.
func newDevice(t testing.TB, be backend.Backend) *device.Device {
	t.Helper()
	dev, err := device.New(device.Config{Backend: be})
	require.NoError(t, err)
	t.Cleanup(func() { dev.Close() })
	return dev
}

// newNodeOn makes a node (a QP, its CQ, PD and buffer) on dev.
func newNodeOn(t testing.TB, dev *device.Device, cfg nodeConfig) *node {
	t.Helper()
	if cfg.bufSize == 0 {
		cfg.bufSize = 1 << 16
	}
	n := &node{dev: dev, pd: dev.AllocPD(), typ: cfg.typ, buf: make([]byte, cfg.bufSize), psn: qp.RandomPSN()}
	var err error
	n.cq, err = cq.New(4096, cq.Config{})
	require.NoError(t, err)
	n.mr, err = n.pd.RegisterMR(n.buf, allAccess)
	require.NoError(t, err)
	ia := qp.InitAttr{Type: cfg.typ, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: qp.Cap{MaxSendWR: 512, MaxRecvWR: 512, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 256}}
	if cfg.srq {
		n.srq, err = qp.CreateSRQ(n.pd, qp.SRQInitAttr{Attr: qp.SRQAttr{MaxWR: 512, MaxSGE: 4}})
		require.NoError(t, err)
		ia.SRQ = n.srq
	}
	n.qp, err = qp.Create(n.pd, ia)
	require.NoError(t, err)
	return n
}

// connect takes n's QP to RTS towards peer, as the pingpong programs do.
func (n *node) connect(t testing.TB, peer *node, cfg nodeConfig) {
	t.Helper()
	if n.typ == qp.UD {
		gid, err := peer.dev.GID(1)
		require.NoError(t, err)
		require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, QKey: qkey}, qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskQKey))
		require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.RTR}, qp.MaskState))
		require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.RTS, SQPSN: n.psn}, qp.MaskState|qp.MaskSQPSN))
		n.ah, err = qp.CreateAH(n.pd, qp.AH{DGID: gid, SGIDIndex: 1, HopLimit: 64, DestPort: peer.dev.LocalAddr().Port()})
		require.NoError(t, err)
		return
	}
	connectRC(t, n, peer.dev.LocalAddr(), peer.qp.QPN(), peer.psn, cfg)
}

// connectRC takes n's RC QP to RTS towards the QP qpn at addr (of this
// process or another), whose first PSN is psn.
func connectRC(t testing.TB, n *node, addr netip.AddrPort, qpn uint32, psn rocev2.PSN, cfg nodeConfig) {
	t.Helper()
	if cfg.timeout == 0 {
		cfg.timeout = 20
	}
	if cfg.retry == 0 {
		cfg.retry = 7
	}
	ah := qp.AH{DGID: device.GIDFromAddr(addr.Addr()), SGIDIndex: 1, HopLimit: 64, DestPort: addr.Port()}
	require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, AccessFlags: allAccess},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags))
	require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.RTR, PathMTU: rocev2.MTU4096, DestQPN: qpn, RQPSN: psn,
		MaxDestRdAtomic: 16, MinRNRTimer: 1, AH: ah},
		qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer))
	require.NoError(t, n.qp.Modify(&qp.Attr{State: qp.RTS, SQPSN: n.psn, Timeout: cfg.timeout, RetryCnt: cfg.retry, RNRRetry: 7, MaxRdAtomic: 16},
		qp.MaskState|qp.MaskSQPSN|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|qp.MaskMaxQPRdAtomic))
}

// pairNodes opens two devices on shared-memory backends in one run
// directory and connects their QPs.
func pairNodes(t testing.TB, cfg nodeConfig, shmA, shmB shm.Config) (a, b *node, ba, bb *shm.Backend) {
	t.Helper()
	dir := runDir(t)
	ba = openShm(t, dir, "127.0.0.1:4791", shmA)
	bb = openShm(t, dir, "127.0.0.2:4791", shmB)
	a, b = newNode(t, ba, cfg), newNode(t, bb, cfg)
	a.connect(t, b, cfg)
	b.connect(t, a, cfg)
	return a, b, ba, bb
}

func (n *node) sge(off, length int) qp.SGE {
	return qp.SGE{Addr: n.mr.VA() + uint64(off), Length: uint32(length), LKey: n.mr.LKey()}
}

func (n *node) postRecv(t testing.TB, wrid uint64, off, length int) {
	t.Helper()
	wr := []qp.RecvWR{{WRID: wrid, SGL: []qp.SGE{n.sge(off, length)}}}
	var err error
	if n.srq != nil {
		_, err = n.srq.PostRecv(wr)
	} else {
		_, err = n.qp.PostRecv(wr)
	}
	require.NoError(t, err)
}

// waitWC polls c until want completions arrived (a hang guard bounds it).
func waitWC(t testing.TB, c *cq.CQ, want int) []cq.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var out []cq.WC
	buf := make([]cq.WC, 64)
	for len(out) < want {
		n := c.Poll(buf)
		out = append(out, buf[:n]...)
		if n > 0 || c.Arm(false) {
			continue
		}
		require.NoError(t, c.Wait(ctx), "waiting for %d completions, have %d: %+v", want, len(out), out)
	}
	return out
}

func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func TestRCEveryOperation(t *testing.T) {
	const half = 2 << 20
	cfg := nodeConfig{typ: qp.RC, bufSize: 2 * half}
	a, b, ba, bb := pairNodes(t, cfg, shm.Config{}, shm.Config{})
	mtu := a.dev.Port().ActiveMTU.Bytes()
	require.Equal(t, 4096, mtu, "the shared-memory link carries IB MTU 4096")
	for _, op := range []qp.WROpcode{qp.WRSend, qp.WRSendWithImm, qp.WRRDMAWrite, qp.WRRDMAWriteWithImm, qp.WRRDMARead} {
		for _, size := range []int{0, 1, mtu - 1, mtu, mtu + 1, 5*mtu + 3, 1 << 20} {
			t.Run(op.String()+"/"+strconv.Itoa(size), func(t *testing.T) {
				fill(a.buf[:half], uint64(size)+uint64(op))
				fill(b.buf[:half], uint64(size)^0xabc)
				clear(a.buf[half:])
				clear(b.buf[half:])
				recv := op == qp.WRSend || op == qp.WRSendWithImm || op == qp.WRRDMAWriteWithImm
				if recv {
					b.postRecv(t, 77, half, max(size, 1))
				}
				wr := qp.SendWR{WRID: 42, Opcode: op, Flags: qp.SendSignaled, Imm: 0xfeedbeef, RKey: b.mr.RKey(), RemoteAddr: b.mr.VA() + half,
					SGL: []qp.SGE{a.sge(0, size)}}
				if op == qp.WRRDMARead {
					wr.RemoteAddr = b.mr.VA()
					wr.SGL = []qp.SGE{a.sge(half, size)}
				}
				_, err := a.qp.PostSend([]qp.SendWR{wr})
				require.NoError(t, err)
				wc := waitWC(t, a.cq, 1)[0]
				require.Equal(t, cq.Success, wc.Status, "%+v", wc)
				assert.Equal(t, uint32(size), wc.ByteLen)
				if recv {
					rw := waitWC(t, b.cq, 1)[0]
					require.Equal(t, cq.Success, rw.Status, "%+v", rw)
					assert.Equal(t, uint32(size), rw.ByteLen)
					if op != qp.WRSend {
						assert.Equal(t, uint32(0xfeedbeef), rw.Imm)
					}
				}
				barrier(t, a, b)
				if op == qp.WRRDMARead {
					require.True(t, bytes.Equal(b.buf[:size], a.buf[half:half+size]), "READ data differs")
				} else {
					require.True(t, bytes.Equal(a.buf[:size], b.buf[half:half+size]), "data differs")
					require.Equal(t, make([]byte, 16), b.buf[half+size:half+size+16], "wrote past the message")
				}
			})
		}
	}
	t.Run("atomics", func(t *testing.T) {
		binary.NativeEndian.PutUint64(b.buf[64:], 100)
		_, err := a.qp.PostSend([]qp.SendWR{
			{WRID: 1, Opcode: qp.WRAtomicFetchAdd, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(0, 8)}, RemoteAddr: b.mr.VA() + 64, RKey: b.mr.RKey(), CompareAdd: 5},
			{WRID: 2, Opcode: qp.WRAtomicCmpAndSwp, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(8, 8)}, RemoteAddr: b.mr.VA() + 64, RKey: b.mr.RKey(), CompareAdd: 105, Swap: 7},
		})
		require.NoError(t, err)
		for _, wc := range waitWC(t, a.cq, 2) {
			require.Equal(t, cq.Success, wc.Status, "%+v", wc)
		}
		assert.Equal(t, uint64(100), binary.NativeEndian.Uint64(a.buf[0:]), "fetch-add returns the old value")
		assert.Equal(t, uint64(105), binary.NativeEndian.Uint64(a.buf[8:]), "cmp-swap returns the old value")
		barrier(t, a, b)
		assert.Equal(t, uint64(7), binary.NativeEndian.Uint64(b.buf[64:]))
	})
	t.Run("inline", func(t *testing.T) {
		b.postRecv(t, 5, half, 64)
		_, err := a.qp.PostSend([]qp.SendWR{{WRID: 5, Opcode: qp.WRSend, Flags: qp.SendSignaled | qp.SendInline, Inline: []byte("inline over shared memory")}})
		require.NoError(t, err)
		require.Equal(t, cq.Success, waitWC(t, a.cq, 1)[0].Status)
		require.Equal(t, cq.Success, waitWC(t, b.cq, 1)[0].Status)
		assert.Equal(t, "inline over shared memory", string(b.buf[half:half+25]))
	})
	// A ring loses nothing: a retransmission would be the transport's own
	// doing (the 4.3 s ACK timeout leaves no room for a late goroutine).
	assert.Zero(t, a.dev.Counters.RetransmittedPkts.Load(), "retransmitted")
	assert.Zero(t, b.dev.Counters.SentNAKs.Load(), "NAKs")
	for _, be := range []*shm.Backend{ba, bb} {
		s := be.Stats()
		assert.Zero(t, s.Dropped+s.CorruptRings+s.BadICRC+s.Fallback, "%+v", s)
		assert.EqualValues(t, 1, s.Pairings, "one pairing, whoever dialed first")
	}
	assert.Equal(t, shm.LinkShm, ba.LinkTo(bb.LocalAddr()))
}

// barrier sends a zero-length SEND from a to b and waits for both
// completions: what b's device did for a happened before it returns.
func barrier(t *testing.T, a, b *node) {
	t.Helper()
	b.postRecv(t, 0xba, 0, 0)
	_, err := a.qp.PostSend([]qp.SendWR{{WRID: 0xba, Opcode: qp.WRSend, Flags: qp.SendSignaled}})
	require.NoError(t, err)
	require.Equal(t, cq.Success, waitWC(t, a.cq, 1)[0].Status)
	require.Equal(t, cq.Success, waitWC(t, b.cq, 1)[0].Status)
}

func TestUDAndSRQ(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  qp.Type
		srq  bool
	}{
		{"UD", qp.UD, false},
		{"UD on an SRQ", qp.UD, true},
		{"RC on an SRQ", qp.RC, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := nodeConfig{typ: tc.typ, srq: tc.srq, bufSize: 1 << 18}
			a, b, _, _ := pairNodes(t, cfg, shm.Config{}, shm.Config{})
			fill(a.buf[:8192], 9)
			const msgs = 50
			for i := range msgs {
				b.postRecv(t, uint64(i), 8192+i*(4096+rocev2.GRHLen), 4096+rocev2.GRHLen)
			}
			var wrs []qp.SendWR
			for i := range msgs {
				size := (i * 97) % 4097
				wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{a.sge(i, size)}}
				if tc.typ == qp.UD {
					wr.AH, wr.RemoteQPN, wr.RemoteQKey = a.ah, b.qp.QPN(), qkey
				}
				wrs = append(wrs, wr)
			}
			_, err := a.qp.PostSend(wrs)
			require.NoError(t, err)
			for _, wc := range waitWC(t, a.cq, msgs) {
				require.Equal(t, cq.Success, wc.Status, "%+v", wc)
			}
			got := waitWC(t, b.cq, msgs)
			for k, wc := range got {
				require.Equal(t, cq.Success, wc.Status, "%+v", wc)
				i := int(wc.WRID)
				assert.Equal(t, k, i, "in order")
				size := (i * 97) % 4097
				off := 8192 + i*(4096+rocev2.GRHLen)
				if tc.typ == qp.UD {
					require.EqualValues(t, rocev2.GRHLen+size, wc.ByteLen)
					assert.Equal(t, a.qp.QPN(), wc.SrcQP)
					src, _, ok := rocev2.GRHSource(b.buf[off : off+rocev2.GRHLen])
					require.True(t, ok)
					assert.Equal(t, a.dev.LocalAddr().Addr(), src)
					off += rocev2.GRHLen
				} else {
					require.EqualValues(t, size, wc.ByteLen)
				}
				require.True(t, bytes.Equal(a.buf[i:i+size], b.buf[off:off+size]), "message %d differs", i)
			}
		})
	}
}
