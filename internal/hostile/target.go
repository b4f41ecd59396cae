// Package hostile is for tests that play a hostile peer: live RC, UC and UD
// queue pairs whose memory no hostile input may change (Target), a way to turn fuzz
// input into batches of datagrams with every field a receiver takes from the
// wire or the kernel under the fuzzer's control (Messages), and the
// accounting that proves every datagram a device took from its backend was
// either handled or dropped and counted (Received).
package hostile

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/device"
)

// RQPSN is the receive PSN a Target's QP expects first: fuzz seeds built
// with it reach the responder's in-sequence path.
const RQPSN = 0x100

// PeerQPN is the QP number a Target's QP is connected to.
const PeerQPN = 0x42

// QKey is the Q_Key of a Target's UD QP: fuzz seeds built with it get past
// the Q_Key check.
const QKey = 0x11111111

// Target is a device with an RC and a UC QP in RTS, connected to a peer at a
// given address, and a UD QP, each with a receive posted, and a memory
// region open to remote write, read and atomics under a random
// (unguessable) rkey. Hostile packets may do anything to the QPs but
// change that region.
type Target struct {
	Dev    *device.Device
	QP     *qp.QP // RC
	UC     *qp.QP
	UD     *qp.QP
	CQ     *cq.CQ
	peer   netip.Addr
	memory []byte
	golden []byte
	recv   *device.MR
	wcs    []cq.WC
	fence  fence
}

// fence is a QP handler that only records the nonce of the fence packets
// it receives: a packet a fuzzer cannot forge (it would need the fence's
// QP number, a valid ICRC and the next nonce), whose arrival shows that
// everything sent to the device before it has been handled.
type fence struct {
	qpn  uint32
	seen atomic.Uint64
	sent uint64
}

func (f *fence) HandlePacket(pkt *rocev2.Packet, _ *backend.Incoming) bool {
	if p := pkt.Payload(); len(p) == 8 {
		f.seen.Store(binary.BigEndian.Uint64(p))
	}
	return true
}

// NewTarget builds a Target on be (which the device then owns), connected
// to peer. The device is closed by tb's cleanup.
func NewTarget(tb testing.TB, be backend.Backend, peer netip.Addr) *Target {
	tb.Helper()
	dev, err := device.New(device.Config{Backend: be})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dev.Close() })
	t := &Target{Dev: dev, peer: peer, memory: make([]byte, 1<<16), wcs: make([]cq.WC, 64)}
	if _, err := rand.Read(t.memory); err != nil {
		tb.Fatal(err)
	}
	t.golden = bytes.Clone(t.memory)
	pd := dev.AllocPD()
	if _, err := pd.RegisterMR(t.memory, device.AccessLocalWrite|device.AccessRemoteWrite|device.AccessRemoteRead|device.AccessRemoteAtomic); err != nil {
		tb.Fatal(err)
	}
	if t.recv, err = pd.RegisterMR(make([]byte, 1<<16), device.AccessLocalWrite); err != nil {
		tb.Fatal(err)
	}
	if t.CQ, err = cq.New(4096, cq.Config{}); err != nil {
		tb.Fatal(err)
	}
	for _, c := range []struct {
		q   **qp.QP
		typ qp.Type
	}{{&t.QP, qp.RC}, {&t.UC, qp.UC}, {&t.UD, qp.UD}} {
		if *c.q, err = qp.Create(pd, qp.InitAttr{Type: c.typ, SendCQ: t.CQ, RecvCQ: t.CQ, Cap: qp.Cap{MaxSendWR: 16, MaxRecvWR: 64}}); err != nil {
			tb.Fatal(err)
		}
	}
	if t.fence.qpn, err = dev.AddQP(&t.fence); err != nil {
		tb.Fatal(err)
	}
	t.Reconnect(tb)
	return t
}

// Fence sends a fence packet with inject, as the hostile datagrams were
// sent, and waits until the device has handled it, and so everything
// injected before it on an order-keeping path. The packet's ICRC is left
// for inject to seal. A fence lost on the way (a fault injector may drop
// or corrupt it) is sent again after a short wait: that costs a packet,
// never a wrong answer.
func (t *Target) Fence(tb testing.TB, inject func(pkt []byte)) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second) // hang guard only
	for time.Now().Before(deadline) {
		t.fence.sent++
		n := t.fence.sent
		fl := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: t.fence.qpn}
		pkt, _ := fl.Append(nil, binary.BigEndian.AppendUint64(nil, n))
		inject(pkt)
		if WaitFor(context.Background(), 20*time.Millisecond, func() bool { return t.fence.seen.Load() >= n }) {
			return
		}
	}
	tb.Fatal("fence packets never reached the device: its receive path is stuck")
}

// Reconnect takes the QPs through RESET to RTS again (a fresh connection,
// whatever the last input did to them), empties the CQ and posts a receive
// on each.
func (t *Target) Reconnect(tb testing.TB) {
	tb.Helper()
	access := device.AccessRemoteWrite | device.AccessRemoteRead | device.AccessRemoteAtomic
	gid := device.GIDFromAddr(t.peer)
	type step struct {
		a qp.Attr
		m qp.AttrMask
	}
	steps := []step{
		{qp.Attr{State: qp.Reset}, qp.MaskState},
		{qp.Attr{State: qp.Init, Port: 1, AccessFlags: access}, qp.MaskState | qp.MaskPKeyIndex | qp.MaskPort | qp.MaskAccessFlags},
		{qp.Attr{State: qp.RTR, PathMTU: rocev2.MTU1024, DestQPN: PeerQPN, RQPSN: RQPSN, MaxDestRdAtomic: 4, MinRNRTimer: 1,
			AH: qp.AH{DGID: gid, SGIDIndex: 1}}, qp.MaskState | qp.MaskAV | qp.MaskPathMTU | qp.MaskDestQPN | qp.MaskRQPSN | qp.MaskMaxDestRdAtomic | qp.MaskMinRNRTimer},
		{qp.Attr{State: qp.RTS, SQPSN: 0x200, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
			qp.MaskState | qp.MaskSQPSN | qp.MaskTimeout | qp.MaskRetryCnt | qp.MaskRNRRetry | qp.MaskMaxQPRdAtomic},
	}
	uc := []step{
		{qp.Attr{State: qp.Reset}, qp.MaskState},
		{qp.Attr{State: qp.Init, Port: 1, AccessFlags: access &^ device.AccessRemoteRead &^ device.AccessRemoteAtomic},
			qp.MaskState | qp.MaskPKeyIndex | qp.MaskPort | qp.MaskAccessFlags},
		{qp.Attr{State: qp.RTR, PathMTU: rocev2.MTU1024, DestQPN: PeerQPN + 1, RQPSN: RQPSN, AH: qp.AH{DGID: gid, SGIDIndex: 1}},
			qp.MaskState | qp.MaskAV | qp.MaskPathMTU | qp.MaskDestQPN | qp.MaskRQPSN},
		{qp.Attr{State: qp.RTS, SQPSN: 0x200}, qp.MaskState | qp.MaskSQPSN},
	}
	ud := []step{
		{qp.Attr{State: qp.Reset}, qp.MaskState},
		{qp.Attr{State: qp.Init, Port: 1, QKey: QKey}, qp.MaskState | qp.MaskPKeyIndex | qp.MaskPort | qp.MaskQKey},
		{qp.Attr{State: qp.RTR}, qp.MaskState},
		{qp.Attr{State: qp.RTS, SQPSN: 0x200}, qp.MaskState | qp.MaskSQPSN},
	}
	for i, q := range []*qp.QP{t.QP, t.UC, t.UD} {
		for _, s := range [][]step{steps, uc, ud}[i] {
			if err := q.Modify(&s.a, s.m); err != nil {
				tb.Fatal(err)
			}
		}
	}
	for t.CQ.Poll(t.wcs) > 0 {
	}
	for i, q := range []*qp.QP{t.QP, t.UC, t.UD} {
		sge := qp.SGE{Addr: t.recv.VA() + uint64(i)*8192, Length: 8192, LKey: t.recv.LKey()}
		if _, err := q.PostRecv([]qp.RecvWR{{WRID: 1, SGL: []qp.SGE{sge}}}); err != nil {
			tb.Fatal(err)
		}
	}
}

// Unchanged reports whether the guarded memory region still holds what it
// held at the start.
func (t *Target) Unchanged() bool { return bytes.Equal(t.memory, t.golden) }

// Aim points a fuzzed packet at the Target's QP of its opcode's transport
// (RC, UC or UD; the RC QP for any other): it writes that QP's number into
// the BTH's destination QP field when the packet is long enough to have
// one. It returns a copy.
func (t *Target) Aim(pkt []byte) []byte {
	p := bytes.Clone(pkt)
	if len(p) >= rocev2.BTHLen {
		q := t.QP
		switch rocev2.Opcode(p[0]).Transport() {
		case rocev2.TransportUC:
			q = t.UC
		case rocev2.TransportUD:
			q = t.UD
		}
		n := q.QPN()
		p[5], p[6], p[7] = byte(n>>16), byte(n>>8), byte(n)
	}
	return p
}

// Received returns how many datagrams the device has taken from its
// backend, by its own counters: every one is either delivered to a QP
// (rcvd_pkts) or dropped and counted under a reason.
func Received(c *device.Counters) uint64 { return c.Received() }

// WaitFor waits until cond holds, for at most limit: a hang guard, not a
// timing assumption (cond is what the test waits for; limit only stops a
// broken device from hanging the test).
func WaitFor(ctx context.Context, limit time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Microsecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return cond()
		case <-tick.C:
		}
	}
	return true
}
