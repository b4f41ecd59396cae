package device

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
)

// pollOnly is a rocev2.Poller whose WaitReadable never reports anything, so
// that only Progress receives: what it hands out is queued by the test, and
// every Send is recorded as one call.
type pollOnly struct {
	mu     sync.Mutex
	in     [][]byte
	sends  [][]string // per Send call, the payload text of each packet
	closed chan struct{}
}

func newPollOnly() *pollOnly { return &pollOnly{closed: make(chan struct{})} }

func (p *pollOnly) Send(pkts []rocev2.Datagram) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var call []string
	for _, d := range pkts {
		var pk rocev2.Packet
		if err := pk.Parse(d.Buf); err != nil {
			return err
		}
		call = append(call, string(pk.Payload()))
	}
	p.sends = append(p.sends, call)
	return nil
}

func (p *pollOnly) Receive([]rocev2.Datagram) (int, error) {
	<-p.closed
	return 0, rocev2.ErrBackendClosed
}

func (p *pollOnly) WaitReadable() error {
	<-p.closed
	return rocev2.ErrBackendClosed
}

func (p *pollOnly) TryReceive(dgs []rocev2.Datagram) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for n < len(dgs) && len(p.in) > 0 {
		dgs[n] = rocev2.Datagram{Buf: p.in[0], Addr: netip.MustParseAddrPort("127.0.0.2:4791"), ICRC: rocev2.ICRCOK}
		p.in = p.in[1:]
		n++
	}
	return n, nil
}

func (p *pollOnly) LocalAddr() netip.AddrPort { return netip.MustParseAddrPort("127.0.0.1:4791") }
func (p *pollOnly) BatchSize() int            { return 8 }
func (p *pollOnly) LinkMTU() int              { return 1500 }
func (p *pollOnly) Close() error {
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	return nil
}

func (p *pollOnly) queue(t *testing.T, qpn uint32, payload string) {
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: qpn}
	b, err := f.Append(nil, []byte(payload))
	require.NoError(t, err)
	p.mu.Lock()
	p.in = append(p.in, b)
	p.mu.Unlock()
}

func (p *pollOnly) sent() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]string(nil), p.sends...)
}

// echoQP answers every packet with one carrying "re:" and its payload.
type echoQP struct{ qpn uint32 }

func (e *echoQP) HandlePacket(pkt *rocev2.Packet, src netip.AddrPort, tx *TxBatch) {
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: e.qpn}
	b, err := f.Append(tx.Buffer(), append([]byte("re:"), pkt.Payload()...))
	if err != nil {
		panic(err)
	}
	tx.Commit(b, src)
}

// openEcho opens a device on a pollOnly backend with an echoQP; the test's
// cleanup closes it (closing twice is harmless).
func openEcho(t *testing.T) (*Device, *pollOnly, uint32) {
	t.Helper()
	be := newPollOnly()
	d, err := New(Config{Backend: be})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	qpn, err := d.AddQP(&echoQP{qpn: 0x99})
	require.NoError(t, err)
	return d, be, qpn
}

// Progress holds back the packets its caller's packets call for, and every
// release point sends them: the next Progress, Release, a post (after the
// posted packets, in the same send), and Close.
func TestProgressHoldsResponsesUntilARelease(t *testing.T) {
	d, be, qpn := openEcho(t)

	assert.False(t, d.Progress(), "nothing waiting")
	assert.Empty(t, be.sent())

	be.queue(t, qpn, "a")
	require.True(t, d.Progress())
	assert.Empty(t, be.sent(), "the answer to a is held back")

	be.queue(t, qpn, "b")
	require.True(t, d.Progress())
	assert.Equal(t, [][]string{{"re:a"}}, be.sent(), "the next Progress sends what the last held")

	d.Release()
	assert.Equal(t, [][]string{{"re:a"}, {"re:b"}}, be.sent(), "Release sends the rest")
	d.Release()
	assert.Len(t, be.sent(), 2, "a second Release has nothing to send")

	be.queue(t, qpn, "c")
	require.True(t, d.Progress())
	tx := d.GetTx()
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x99}
	b, err := f.Append(tx.Buffer(), []byte("posted"))
	require.NoError(t, err)
	tx.Commit(b, netip.MustParseAddrPort("127.0.0.2:4791"))
	d.PutTx(tx)
	assert.Equal(t, []string{"posted", "re:c"}, be.sent()[2], "a one-packet post sends the held answer after its packet, in one send")

	be.queue(t, qpn, "c2")
	require.True(t, d.Progress())
	tx = d.GetTx()
	for _, p := range []string{"burst1", "burst2"} {
		b, err := f.Append(tx.Buffer(), []byte(p))
		require.NoError(t, err)
		tx.Commit(b, netip.MustParseAddrPort("127.0.0.2:4791"))
	}
	d.PutTx(tx)
	assert.Equal(t, []string{"re:c2", "burst1", "burst2"}, be.sent()[3], "a longer burst goes after the held answer, in one send")

	be.queue(t, qpn, "d")
	require.True(t, d.Progress())
	require.NoError(t, d.Close())
	assert.Equal(t, []string{"re:d"}, be.sent()[4], "Close sends what is held")
}

// What one device holds is released by Progress on another device of the
// process, and, when nothing touches the device, by the backstop timer.
func TestHeldResponsesAreNeverStranded(t *testing.T) {
	a, abe, aqpn := openEcho(t)
	b, _, _ := openEcho(t)

	abe.queue(t, aqpn, "x")
	require.True(t, a.Progress())
	require.Empty(t, abe.sent(), "held")
	b.Progress()
	assert.Equal(t, [][]string{{"re:x"}}, abe.sent(), "another device's Progress released it")

	abe.queue(t, aqpn, "y")
	require.True(t, a.Progress())
	require.Len(t, abe.sent(), 1, "held")
	// Nothing touches a now: the backstop sends it within a few ticks.
	require.Eventually(t, func() bool { return len(abe.sent()) == 2 }, time.Second, holdBackstop/4,
		"the backstop timer did not release the held packet")
	assert.Equal(t, []string{"re:y"}, abe.sent()[1])
}

// Close sends what is held even when the receive lock is busy as it
// closes: it waits for the lock rather than leave the packets to a receive
// goroutine whose flush would come after the backend is closed.
func TestCloseSendsHeldResponsesWhileTheReceiveLockIsBusy(t *testing.T) {
	d, be, qpn := openEcho(t)
	be.queue(t, qpn, "last")
	require.True(t, d.Progress())
	require.Empty(t, be.sent(), "held")

	d.rxMu.Lock() // as if the receive goroutine were handling a batch
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	isLive := func() bool {
		for _, o := range *liveDevices.Load() {
			if o == d {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return !isLive() }, 5*time.Second, time.Millisecond, "Close did not start")
	d.rxMu.Unlock()
	require.NoError(t, <-closed)
	assert.Equal(t, [][]string{{"re:last"}}, be.sent())
}
