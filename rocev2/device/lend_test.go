package device

import (
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
)

// lendRig is a device on a memlink backend (a backend.Lendable), a QP that
// counts what it receives, and a bare peer backend that sends it packets.
type lendRig struct {
	d    *Device
	peer *memlink.Backend
	qpn  uint32
	q    *countingQP
}

type countingQP struct {
	got     atomic.Int32
	arrived chan struct{}
}

func (q *countingQP) HandlePacket(*rocev2.Packet, *backend.Incoming) bool {
	q.got.Add(1)
	q.arrived <- struct{}{}
	return true
}

func newLendRig(t *testing.T, hold time.Duration) *lendRig {
	t.Helper()
	n := memlink.NewNetwork()
	b, err := n.Attach(netip.MustParseAddrPort("127.0.0.1:4791"))
	require.NoError(t, err)
	peer, err := n.Attach(netip.MustParseAddrPort("127.0.0.2:4791"))
	require.NoError(t, err)
	t.Cleanup(func() { peer.Close() })
	d, err := New(Config{Backend: b, HoldLimit: hold})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	q := &countingQP{arrived: make(chan struct{}, 64)}
	qpn, err := d.AddQP(q)
	require.NoError(t, err)
	return &lendRig{d: d, peer: peer, qpn: qpn, q: q}
}

// send has the peer send one packet to the rig's QP.
func (r *lendRig) send(t *testing.T) {
	t.Helper()
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: r.qpn}
	buf, err := f.Append(nil, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, r.peer.Send([]backend.Outgoing{{Buf: buf, Dst: r.d.LocalAddr()}}))
}

// got waits for the QP to have received n packets in all.
func (r *lendRig) got(t *testing.T, n int32) {
	t.Helper()
	for r.q.got.Load() < n {
		select {
		case <-r.q.arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("the QP got %d packets, want %d", r.q.got.Load(), n)
		}
	}
}

func (r *lendRig) server() serverKind {
	r.d.lend.mu.Lock()
	defer r.d.lend.mu.Unlock()
	return r.d.lend.server
}

// waitServer waits until who serves the device, as the receive goroutine
// steps aside or resumes on its own time.
func (r *lendRig) waitServer(t *testing.T, want serverKind) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); r.server() != want; runtime.Gosched() {
		if time.Now().After(end) {
			t.Fatalf("served by %d, want %d", r.server(), want)
		}
	}
}

// pend brings the device to pending the way a reader does: it waits
// while the receive goroutine serves, which steps aside once the reader's
// packet is delivered.
func (r *lendRig) pend(t *testing.T) {
	t.Helper()
	r.stepAside(t)
	r.waitServer(t, servedByNobody)
}

// stepAside has the receive goroutine step aside; with a short backstop
// the device may be pending only briefly.
func (r *lendRig) stepAside(t *testing.T) {
	t.Helper()
	n := r.q.got.Load() + 1
	w := NewWaiter(func() bool { return r.q.got.Load() >= n })
	require.False(t, r.d.WaitOn(w), "the receive goroutine serves: the first wait cannot")
	r.send(t)
	r.got(t, n)
	r.d.EndWait(w)
}

func TestWaitOn(t *testing.T) {
	cases := []struct {
		name string
		// end ends the lent wait of waiter w, whose ready reports flag.
		end func(t *testing.T, r *lendRig, w *Waiter, flag *atomic.Bool)
		// after is who serves once the wait has ended.
		after serverKind
	}{
		{name: "a packet for the waiter", after: servedByNobody,
			end: func(t *testing.T, r *lendRig, _ *Waiter, flag *atomic.Bool) {
				flag.Store(true) // ready once the batch with the packet ends
				r.send(t)
			}},
		{name: "a kick without a packet", after: servedByNobody,
			end: func(t *testing.T, r *lendRig, w *Waiter, flag *atomic.Bool) {
				flag.Store(true)
				w.Kick()
			}},
		{name: "close", after: servedByRecv,
			end: func(t *testing.T, r *lendRig, _ *Waiter, _ *atomic.Bool) { r.d.Close() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newLendRig(t, time.Hour)
			r.pend(t)
			var flag atomic.Bool
			w := NewWaiter(flag.Load)
			done := make(chan bool)
			go func() { done <- r.d.WaitOn(w) }()
			r.waitServer(t, servedByLender)
			tc.end(t, r, w, &flag)
			require.True(t, <-done, "the wait was lent")
			require.EqualValues(t, 1, r.d.Counters.LentWaits.Load())
			require.Equal(t, tc.after, r.server())
		})
	}
}

// A pending device serves again when a goroutine begins to wait for it
// some other way, or at the backstop.
func TestPendingDeviceResumes(t *testing.T) {
	cases := []struct {
		name      string
		hold      time.Duration
		begin     bool // a BeginWait before the packet
		backstops uint64
	}{
		{name: "BeginWait", hold: time.Hour, begin: true},
		{name: "backstop", hold: time.Millisecond, backstops: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newLendRig(t, tc.hold)
			if tc.begin {
				r.pend(t)
				r.d.BeginWait()
				defer r.d.EndWait(nil)
			} else {
				r.stepAside(t)
				for end := time.Now().Add(10 * time.Second); r.d.Counters.LentWaitBackstops.Load() == 0; runtime.Gosched() {
					require.False(t, time.Now().After(end), "no backstop")
				}
			}
			r.waitServer(t, servedByRecv)
			r.send(t)
			r.got(t, 2) // delivered by the receive goroutine: nobody else serves
			require.Equal(t, tc.backstops, r.d.Counters.LentWaitBackstops.Load())
			require.Zero(t, r.d.Counters.LentWaits.Load())
		})
	}
}

// A second goroutine that waits while one serves does not serve; when
// the lender leaves, the receive goroutine serves for it.
func TestSecondWaiterResumesTheReceiveGoroutine(t *testing.T) {
	r := newLendRig(t, time.Hour)
	r.pend(t)
	var first atomic.Bool
	done := make(chan bool)
	go func() { done <- r.d.WaitOn(NewWaiter(first.Load)) }()
	r.waitServer(t, servedByLender)
	second := NewWaiter(func() bool { return r.q.got.Load() >= 3 })
	require.False(t, r.d.WaitOn(second), "one goroutine serves at a time")
	first.Store(true)
	r.send(t)
	require.True(t, <-done)
	require.Equal(t, servedByRecv, r.server(), "the second waiter needs a server")
	r.send(t)
	r.got(t, 3)
	r.d.EndWait(second)
}

// A backend that cannot be lent never lends: WaitOn reports false and
// BeginWait and EndWait do nothing.
func TestWaitOnNeedsALendableBackend(t *testing.T) {
	d, err := New(Config{Backend: newPollOnly(), HoldLimit: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	w := NewWaiter(func() bool { return true })
	require.False(t, d.WaitOn(w))
	d.EndWait(w)
	d.BeginWait()
	d.EndWait(nil)
	require.Zero(t, d.Counters.LentWaits.Load())
}
