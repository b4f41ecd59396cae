package device

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
)

// pollOnly is a rocev2.Poller whose WaitReadable reports readiness only
// when the test sends a token on ready, so that packets the test queues are
// received where the test says: by a Poller (progress) or, after a token,
// by the receive goroutine. Every Send is recorded as one call.
type pollOnly struct {
	mu     sync.Mutex
	in     [][]byte
	sends  [][]string // per Send call, the payload text of each packet
	ready  chan struct{}
	closed chan struct{}
}

func newPollOnly() *pollOnly {
	return &pollOnly{ready: make(chan struct{}), closed: make(chan struct{})}
}

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
	select {
	case <-p.ready:
		return nil
	case <-p.closed:
		return rocev2.ErrBackendClosed
	}
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

func (p *pollOnly) queue(t testing.TB, qpn uint32, payload string) {
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

// echoQP answers every packet with a response (a READ response, which
// carries a payload) of "re:" and its payload, and pushes a completion to
// its CQ, as a QP's responder does.
type echoQP struct {
	dev *Device
	cq  *cq.CQ
}

func (e *echoQP) HandlePacket(pkt *rocev2.Packet, dg *rocev2.Datagram) bool {
	o := e.dev.Outbox()
	f := rocev2.Fields{Opcode: rocev2.RCReadResponseOnly, PKey: 0xffff, DestQP: 0x99}
	b, _ := f.AppendHeaders(o.Buffer(), 3+len(pkt.Payload()))
	b = append(append(b, "re:"...), pkt.Payload()...)
	o.Commit(rocev2.AppendTrailer(b, 3+len(pkt.Payload())), dg.Addr)
	o.Done()
	e.cq.Notify(e.cq.Push(&cq.WC{Opcode: cq.OpRecv}, false))
	return true
}

// post builds one request per payload, in one post, as PostSend does.
func post(d *Device, payloads ...string) {
	o := d.Outbox()
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x99}
	for _, p := range payloads {
		b, _ := f.Append(o.Buffer(), []byte(p))
		o.Commit(b, netip.MustParseAddrPort("127.0.0.2:4791"))
	}
	o.DonePost()
}

// openEcho opens a device on a pollOnly backend with an echoQP; the test's
// cleanup closes it (closing twice is harmless).
func openEcho(t testing.TB, limit time.Duration) (*Device, *pollOnly, *echoQP, uint32) {
	t.Helper()
	be := newPollOnly()
	d, err := New(Config{Backend: be, HoldLimit: limit})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	c, err := cq.New(64, cq.Config{})
	require.NoError(t, err)
	e := &echoQP{dev: d, cq: c}
	qpn, err := d.AddQP(e)
	require.NoError(t, err)
	return d, be, e, qpn
}

// A Poller that gets completions holds the ACKs its received packets call
// for until its next call on the device; each release point sends them.
// (No backstop interferes: its limit is an hour.)
func TestPollerHoldsAnswersUntilTheNextCall(t *testing.T) {
	d, be, e, qpn := openEcho(t, time.Hour)
	p := d.NewPoller(e.cq)
	wcs := make([]cq.WC, 4)
	steps := []struct {
		name  string
		do    func()
		polls int        // completions the step's Poll must return (-1: no Poll)
		last  []string   // the last Send call after the step
		sends int        // Send calls so far
		extra func() int // a further check: Send calls it expects
	}{
		{"nothing waits", func() {}, 0, nil, 0, nil},
		{"a completion holds the answer", func() { be.queue(t, qpn, "a") }, 1, nil, 0, nil},
		{"the next Poll sends what the last held", func() { be.queue(t, qpn, "b") }, 1, []string{"re:a"}, 1, nil},
		{"Release sends it", func() { p.Release() }, -1, []string{"re:b"}, 2, nil},
		{"a second Release has nothing to send", func() { p.Release() }, -1, []string{"re:b"}, 2, nil},
		{"hold for a post", func() { be.queue(t, qpn, "c") }, 1, []string{"re:b"}, 2, nil},
		{"a one-request post goes first, the held answer with it", func() { post(d, "posted") }, -1, []string{"posted", "re:c"}, 3, nil},
		{"hold for a burst", func() { be.queue(t, qpn, "c2") }, 1, []string{"posted", "re:c"}, 3, nil},
		{"a burst goes after the held answer, in one send", func() { post(d, "burst1", "burst2") }, -1, []string{"re:c2", "burst1", "burst2"}, 4, nil},
		{"hold before sleeping", func() { be.queue(t, qpn, "d") }, 1, []string{"re:c2", "burst1", "burst2"}, 4, nil},
		{"Arm sends it", func() { p.Arm(false) }, -1, []string{"re:d"}, 5, nil},
		{"hold at Close", func() { be.queue(t, qpn, "z") }, 1, []string{"re:d"}, 5, nil},
		{"Close sends it", func() { require.NoError(t, d.Close()) }, -1, []string{"re:z"}, 6, nil},
	}
	for _, s := range steps {
		s.do()
		if s.polls >= 0 {
			require.Equal(t, s.polls, p.Poll(wcs), s.name)
		}
		got := be.sent()
		require.Len(t, got, s.sends, s.name)
		if s.last != nil {
			require.Equal(t, s.last, got[len(got)-1], s.name)
		}
	}
}

// Packets whose completions go to another CQ leave at once: the poller has
// nothing to answer, so nothing is held for it.
func TestPollerHoldsNothingForOtherCQs(t *testing.T) {
	d, be, _, qpn := openEcho(t, time.Hour)
	other, err := cq.New(4, cq.Config{})
	require.NoError(t, err)
	be.queue(t, qpn, "x")
	require.Zero(t, d.NewPoller(other).Poll(make([]cq.WC, 4)))
	require.Equal(t, [][]string{{"re:x"}}, be.sent())
}

// Runs defer sends until the last open one ends; outside runs a post
// leaves at once.
func TestRunsDeferSendsUntilTheLastEnds(t *testing.T) {
	d, be, _, _ := openEcho(t, time.Hour)
	post(d, "now")
	require.Equal(t, [][]string{{"now"}}, be.sent(), "no run open: sent at once")
	d.BeginRun()
	d.BeginRun() // two completion runs at once
	post(d, "a")
	post(d, "b")
	require.Len(t, be.sent(), 1, "held while runs are open")
	d.EndRun()
	require.Len(t, be.sent(), 1, "one run is still open")
	post(d, "c")
	d.EndRun()
	require.Equal(t, []string{"a", "b", "c"}, be.sent()[1], "the last run to end sends them, in one call")
	post(d, "d")
	require.Equal(t, []string{"d"}, be.sent()[2], "all runs ended: sent at once again")
}

// More packets than the outbox holds: the builder sends the full batch and
// goes on (back-pressure), nothing is lost or allocated.
func TestFullOutboxSendsFirst(t *testing.T) {
	d, be, _, _ := openEcho(t, time.Hour)
	d.BeginRun()
	var want []string
	for i := range 3*d.BatchSize() + 1 {
		p := string(rune('A' + i%26))
		want = append(want, p)
		post(d, p)
	}
	require.Len(t, be.sent(), 3, "three full batches went while the run was open")
	d.EndRun()
	var got []string
	for _, s := range be.sent() {
		got = append(got, s...)
	}
	require.Equal(t, want, got, "every packet once, in order")
}

// Whatever defers a packet, the backstop sends it when nothing else does:
// a poller that never calls again, a completion run that never ends, a
// receive batch whose end hook blocks.
func TestBackstopSendsWhatWaits(t *testing.T) {
	const limit = 2 * time.Millisecond
	tests := []struct {
		name  string
		setup func(t *testing.T, d *Device, be *pollOnly, e *echoQP, qpn uint32) (cleanup func())
		want  []string
	}{
		{"a poller's hold", func(t *testing.T, d *Device, be *pollOnly, e *echoQP, qpn uint32) func() {
			be.queue(t, qpn, "held")
			require.Equal(t, 1, d.NewPoller(e.cq).Poll(make([]cq.WC, 4)))
			return func() {}
		}, []string{"re:held"}},
		{"a run that never ends", func(t *testing.T, d *Device, be *pollOnly, e *echoQP, qpn uint32) func() {
			d.BeginRun()
			post(d, "stuck")
			return d.EndRun
		}, []string{"stuck"}},
		{"an end hook that blocks", func(t *testing.T, d *Device, be *pollOnly, e *echoQP, qpn uint32) func() {
			release := make(chan struct{})
			d.OnReceiveBatch(func() {}, func() { <-release })
			be.queue(t, qpn, "req")
			be.ready <- struct{}{}
			return func() { close(release) }
		}, []string{"re:req"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, be, e, qpn := openEcho(t, limit)
			cleanup := tt.setup(t, d, be, e, qpn)
			defer cleanup()
			// Waits for the send; the bound only stops a broken backstop
			// from hanging the test.
			require.Eventually(t, func() bool { return len(be.sent()) == 1 }, 30*time.Second, time.Millisecond)
			require.Equal(t, tt.want, be.sent()[0])
		})
	}
}

// The receive goroutine calls the hooks around each batch, inside the
// batch's run: what end posts leaves with the batch's answers in one send,
// and a Poller inside the hooks receives nothing (the batch receives again
// right after).
func TestReceiveBatchHooks(t *testing.T) {
	d, be, e, qpn := openEcho(t, time.Hour)
	var begins, ends int
	inside := make(chan int, 1)
	remove := d.OnReceiveBatch(func() { begins++ }, func() {
		ends++
		be.queue(t, qpn, "later")
		inside <- d.NewPoller(e.cq).Poll(make([]cq.WC, 0, 4)[:4])
		post(d, "reply")
	})
	be.queue(t, qpn, "req")
	be.ready <- struct{}{}
	require.Equal(t, 1, <-inside, "the Poller took the batch's completion, and received nothing more")
	require.Eventually(t, func() bool { return len(be.sent()) == 1 }, 30*time.Second, time.Millisecond)
	require.Equal(t, []string{"reply", "re:req"}, be.sent()[0], "one send: the lone request first")

	remove()
	be.ready <- struct{}{}
	require.Eventually(t, func() bool { return len(be.sent()) == 2 }, 30*time.Second, time.Millisecond)
	require.Equal(t, []string{"re:later"}, be.sent()[1], "no hooks: the answers leave after the batch")
	require.Equal(t, 1, begins)
	require.Equal(t, 1, ends, "removed hooks are not called")
}

// ackQP answers every packet with an RC ACK, or a NAK when its payload is
// "nak", and pushes a completion, as a responder does for a SEND.
type ackQP struct {
	dev *Device
	cq  *cq.CQ
}

func (a *ackQP) HandlePacket(pkt *rocev2.Packet, dg *rocev2.Datagram) bool {
	o := a.dev.Outbox()
	syndrome := uint8(0x1F) // ACK, credits invalid
	if string(pkt.Payload()) == "nak" {
		syndrome = 0x60 // NAK: PSN sequence error
	}
	f := rocev2.Fields{Opcode: rocev2.RCAcknowledge, PKey: 0xffff, DestQP: 0x99, Syndrome: rocev2.Syndrome(syndrome)}
	b, _ := f.Append(o.Buffer(), nil)
	o.Commit(b, dg.Addr)
	o.Done()
	a.cq.Notify(a.cq.Push(&cq.WC{Opcode: cq.OpRecv}, false))
	return true
}

// With DeferACKs, the plain ACKs a receive batch calls for wait for the
// device's next post and leave in its system call; a NAK does not wait,
// nor does what waits with it; Close sends a held ACK. (No backstop
// interferes: its limit is an hour.)
func TestDeferredACKsLeaveWithTheNextPost(t *testing.T) {
	be := newPollOnly()
	d, err := New(Config{Backend: be, HoldLimit: time.Hour, DeferACKs: true})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	c, err := cq.New(64, cq.Config{})
	require.NoError(t, err)
	qpn, err := d.AddQP(&ackQP{dev: d, cq: c})
	require.NoError(t, err)
	// receive has the receive goroutine handle what is queued; the second
	// token is taken only once the first batch has ended.
	receive := func(payloads ...string) {
		for _, p := range payloads {
			be.queue(t, qpn, p)
		}
		be.ready <- struct{}{}
		be.ready <- struct{}{}
	}
	ack := ""
	receive("a")
	require.Empty(t, be.sent(), "the ACK waits for a post")
	post(d, "answer")
	require.Equal(t, [][]string{{"answer", ack}}, be.sent(), "the answer first, its ACK with it, in one send")

	receive("b", "c")
	require.Len(t, be.sent(), 1, "two ACKs wait")
	receive("nak")
	require.Equal(t, []string{ack, ack, ack}, be.sent()[1], "a NAK goes at once, with the ACKs before it")

	receive("z")
	require.Len(t, be.sent(), 2)
	require.NoError(t, d.Close())
	require.Equal(t, []string{ack}, be.sent()[2], "Close sends a held ACK")
}
