package device

import (
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// pollOnly is a backend.Poller whose Serve drains only when the test sends
// a token on ready, so that packets the test queues are received where the
// test says: by a Poller (progress) or, after a token, by the receive
// goroutine. Every Send is recorded as one call.
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

func (p *pollOnly) Send(pkts []backend.Outgoing) error {
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

func (p *pollOnly) Receive([]backend.Incoming) (int, error) {
	<-p.closed
	return 0, backend.ErrBackendClosed
}

func (p *pollOnly) Serve(drain func() bool) error {
	for {
		select {
		case <-p.ready:
			for drain() {
			}
		case <-p.closed:
			return backend.ErrBackendClosed
		}
	}
}

func (p *pollOnly) TryReceive(dgs []backend.Incoming) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for n < len(dgs) && len(p.in) > 0 {
		dgs[n] = backend.Incoming{Buf: p.in[0], Src: netip.MustParseAddrPort("127.0.0.2:4791"), ICRC: backend.ICRCOK}
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

// owingQP owes an ACK for every packet, as a responder does for a SEND
// with AckReq, and pushes a completion to its CQ. The ACK it builds when
// the device asks (SendOwedACK) is a READ response whose payload says
// what it acknowledges ("ack:" and the last payload), so that the tests
// can tell it apart; a packet with the payload "nak" is answered at once
// ("nak:nak"), which covers what was owed, as a NAK does.
type owingQP struct {
	dev    *Device
	cq     *cq.CQ
	owed   string
	queued bool
}

func (q *owingQP) HandlePacket(pkt *rocev2.Packet, dg *backend.Incoming) bool {
	if p := string(pkt.Payload()); p == "nak" {
		q.build("nak:" + p)
		q.owed = ""
	} else {
		q.owed = p
		if !q.queued {
			q.queued = true
			q.dev.OweACK(q)
		}
	}
	q.cq.Notify(q.cq.Push(&cq.WC{Opcode: cq.OpRecv}, false))
	return true
}

func (q *owingQP) SendOwedACK() {
	q.queued = false
	if q.owed != "" {
		q.build("ack:" + q.owed)
		q.owed = ""
	}
}

func (q *owingQP) build(payload string) {
	o := q.dev.Outbox()
	f := rocev2.Fields{Opcode: rocev2.RCReadResponseOnly, PKey: 0xffff, DestQP: 0x99}
	b, _ := f.Append(o.Buffer(), []byte(payload))
	o.Commit(b, netip.MustParseAddrPort("127.0.0.2:4791"))
	o.Done()
}

// post builds one request per payload, in one post, as PostSend does.
func post(d *Device, payloads ...string) {
	o := d.Outbox()
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x99}
	for _, p := range payloads {
		b, _ := f.Append(o.Buffer(), []byte(p))
		o.Commit(b, netip.MustParseAddrPort("127.0.0.2:4791"))
	}
	o.Release()
	d.Posted()
}

// openOwing opens a device on a pollOnly backend with an owingQP; the
// test's cleanup closes it (closing twice is harmless).
func openOwing(t testing.TB, cfg Config) (*Device, *pollOnly, *owingQP, uint32) {
	t.Helper()
	be := newPollOnly()
	cfg.Backend = be
	d, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	c, err := cq.New(64, cq.Config{})
	require.NoError(t, err)
	q := &owingQP{dev: d, cq: c}
	qpn, err := d.AddQP(q)
	require.NoError(t, err)
	return d, be, q, qpn
}

// A Poller that gets completions holds the ACKs its received packets call
// for until its next call on the device; each release point sends them,
// after what it posts. (No backstop interferes: its limit is an hour.)
func TestPollerHoldsACKsUntilTheNextCall(t *testing.T) {
	d, be, q, qpn := openOwing(t, Config{HoldLimit: time.Hour})
	p := d.NewPoller(q.cq)
	wcs := make([]cq.WC, 4)
	steps := []struct {
		name  string
		do    func()
		polls int      // completions the step's Poll must return (-1: no Poll)
		last  []string // the last Send call after the step
		sends int      // Send calls so far
	}{
		{"nothing waits", func() {}, 0, nil, 0},
		{"a completion holds the ACK", func() { be.queue(t, qpn, "a") }, 1, nil, 0},
		{"the next Poll sends what the last held", func() { be.queue(t, qpn, "b") }, 1, []string{"ack:a"}, 1},
		{"Release sends it", func() { p.Release() }, -1, []string{"ack:b"}, 2},
		{"a second Release has nothing to send", func() { p.Release() }, -1, []string{"ack:b"}, 2},
		{"hold for a post", func() { be.queue(t, qpn, "c") }, 1, []string{"ack:b"}, 2},
		{"the post goes first, the held ACK with it", func() { post(d, "posted") }, -1, []string{"posted", "ack:c"}, 3},
		{"hold for a burst", func() { be.queue(t, qpn, "c2") }, 1, []string{"posted", "ack:c"}, 3},
		{"a burst too, in one send", func() { post(d, "burst1", "burst2") }, -1, []string{"burst1", "burst2", "ack:c2"}, 4},
		{"a NAK leaves at once, covering what was owed", func() { be.queue(t, qpn, "x"); be.queue(t, qpn, "nak") }, 2, []string{"nak:nak"}, 5},
		{"hold before sleeping", func() { be.queue(t, qpn, "d") }, 1, []string{"nak:nak"}, 5},
		{"Arm sends it", func() { p.Arm(false) }, -1, []string{"ack:d"}, 6},
		{"hold at Close", func() { be.queue(t, qpn, "z") }, 1, []string{"ack:d"}, 6},
		{"Close sends it", func() { require.NoError(t, d.Close()) }, -1, []string{"ack:z"}, 7},
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

// Packets whose completions go to another CQ are acknowledged at once: the
// poller has nothing to answer, so nothing is held for it.
func TestPollerHoldsNothingForOtherCQs(t *testing.T) {
	d, be, _, qpn := openOwing(t, Config{HoldLimit: time.Hour})
	other, err := cq.New(4, cq.Config{})
	require.NoError(t, err)
	be.queue(t, qpn, "x")
	require.Zero(t, d.NewPoller(other).Poll(make([]cq.WC, 4)))
	require.Equal(t, [][]string{{"ack:x"}}, be.sent())
}

// Runs defer sends until the last open one ends; outside runs a post
// leaves at once.
func TestRunsDeferSendsUntilTheLastEnds(t *testing.T) {
	d, be, _, _ := openOwing(t, Config{HoldLimit: time.Hour})
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
	d, be, _, _ := openOwing(t, Config{HoldLimit: time.Hour})
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

// Posts from many goroutines at once: every packet leaves once, each
// goroutine's in the order it posted them, and no Send call runs while
// another does (the outbox's sender sends what the others leave, and
// none of them waits for a system call under the outbox's lock).
func TestConcurrentPostsLeaveInOrder(t *testing.T) {
	be := &serialSender{pollOnly: newPollOnly()}
	d, err := New(Config{Backend: be, HoldLimit: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	const posters, each = 4, 500
	var wg sync.WaitGroup
	for g := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				post(d, string(rune('a'+g))+strconv.Itoa(i))
			}
		}()
	}
	wg.Wait()
	require.False(t, be.overlapped.Load(), "two Send calls overlapped")
	next := make([]int, posters)
	total := 0
	for _, call := range be.sent() {
		for _, p := range call {
			g := int(p[0] - 'a')
			require.Equal(t, strconv.Itoa(next[g]), p[1:], "poster %d's packets in order", g)
			next[g]++
			total++
		}
	}
	require.Equal(t, posters*each, total, "every packet once")
}

// serialSender records whether two Send calls ever overlapped.
type serialSender struct {
	*pollOnly
	in         atomic.Int32
	overlapped atomic.Bool
}

func (s *serialSender) Send(pkts []backend.Outgoing) error {
	if s.in.Add(1) > 1 {
		s.overlapped.Store(true)
	}
	defer s.in.Add(-1)
	runtime.Gosched() // give the other posters a chance to come in meanwhile
	return s.pollOnly.Send(pkts)
}

// Whatever defers a packet, the backstop sends it when nothing else does:
// a poller that never calls again, a completion run that never ends, a
// receive batch whose end hook blocks, a device that defers ACKs.
func TestBackstopSendsWhatWaits(t *testing.T) {
	const limit = 2 * time.Millisecond
	tests := []struct {
		name      string
		deferACKs bool
		setup     func(t *testing.T, d *Device, be *pollOnly, q *owingQP, qpn uint32) (cleanup func())
		want      []string
	}{
		{"a poller's hold", false, func(t *testing.T, d *Device, be *pollOnly, q *owingQP, qpn uint32) func() {
			be.queue(t, qpn, "held")
			require.Equal(t, 1, d.NewPoller(q.cq).Poll(make([]cq.WC, 4)))
			return func() {}
		}, []string{"ack:held"}},
		{"a run that never ends", false, func(t *testing.T, d *Device, be *pollOnly, q *owingQP, qpn uint32) func() {
			d.BeginRun()
			post(d, "stuck")
			return d.EndRun
		}, []string{"stuck"}},
		{"an end hook that blocks", false, func(t *testing.T, d *Device, be *pollOnly, q *owingQP, qpn uint32) func() {
			release := make(chan struct{})
			d.OnReceiveBatch(func() {}, func() { <-release })
			be.queue(t, qpn, "req")
			be.ready <- struct{}{}
			return func() { close(release) }
		}, []string{"ack:req"}},
		{"deferred ACKs", true, func(t *testing.T, d *Device, be *pollOnly, q *owingQP, qpn uint32) func() {
			be.queue(t, qpn, "later")
			be.ready <- struct{}{}
			return func() {}
		}, []string{"ack:later"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, be, q, qpn := openOwing(t, Config{HoldLimit: limit, DeferACKs: tt.deferACKs})
			cleanup := tt.setup(t, d, be, q, qpn)
			defer cleanup()
			// Waits for the send; the bound only stops a broken backstop
			// from hanging the test.
			require.Eventually(t, func() bool { return len(be.sent()) == 1 }, 30*time.Second, time.Millisecond)
			require.Equal(t, tt.want, be.sent()[0])
		})
	}
}

// The receive goroutine calls the hooks around each batch, inside the
// batch's run: what end posts leaves with the batch's ACKs in one send,
// and a Poller inside the hooks receives nothing (the batch receives again
// right after).
func TestReceiveBatchHooks(t *testing.T) {
	d, be, q, qpn := openOwing(t, Config{HoldLimit: time.Hour})
	var begins, ends int
	inside := make(chan int, 1)
	remove := d.OnReceiveBatch(func() { begins++ }, func() {
		ends++
		be.queue(t, qpn, "later")
		inside <- d.NewPoller(q.cq).Poll(make([]cq.WC, 0, 4)[:4])
		post(d, "reply")
	})
	be.queue(t, qpn, "req")
	be.ready <- struct{}{}
	require.Equal(t, 1, <-inside, "the Poller took the batch's completion, and received nothing more")
	require.Eventually(t, func() bool { return len(be.sent()) == 1 }, 30*time.Second, time.Millisecond)
	require.Equal(t, []string{"reply", "ack:req"}, be.sent()[0], "one send: the reply, then the batch's ACK")

	remove()
	be.ready <- struct{}{}
	require.Eventually(t, func() bool { return len(be.sent()) == 2 }, 30*time.Second, time.Millisecond)
	require.Equal(t, []string{"ack:later"}, be.sent()[1], "no hooks: the ACK leaves after the batch")
	require.Equal(t, 1, begins)
	require.Equal(t, 1, ends, "removed hooks are not called")
}

// With DeferACKs, the ACKs receive batches call for stay owed across
// batches and posts (one ACK covers them all); an answer built at once (a
// NAK) covers what was owed; Close sends what is owed. (No backstop
// interferes: its limit is an hour.)
func TestDeferredACKsCoverSeveralBatches(t *testing.T) {
	d, be, _, qpn := openOwing(t, Config{HoldLimit: time.Hour, DeferACKs: true})
	// receive has the receive goroutine handle what is queued; the second
	// token is taken only once the first batch has ended.
	receive := func(payloads ...string) {
		for _, p := range payloads {
			be.queue(t, qpn, p)
		}
		be.ready <- struct{}{}
		be.ready <- struct{}{}
	}
	receive("a")
	require.Empty(t, be.sent(), "the ACK stays owed")
	post(d, "answer")
	require.Equal(t, [][]string{{"answer"}}, be.sent(), "a post does not end it")
	receive("b")
	receive("c")
	require.Len(t, be.sent(), 1, "still owed")
	receive("nak")
	require.Equal(t, []string{"nak:nak"}, be.sent()[1], "a NAK goes at once and covers what was owed")
	receive("z")
	require.Len(t, be.sent(), 2)
	require.NoError(t, d.Close())
	require.Equal(t, []string{"ack:z"}, be.sent()[2], "Close sends what is owed")
}

// Drain returns only once every packet built before it has been handed
// to the backend: also those left for a sender that is still in
// Backend.Send (where Flush returns at once).
func TestDrainWaitsForTheSender(t *testing.T) {
	be := &blockingSender{pollOnly: newPollOnly(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	d, err := New(Config{Backend: be, HoldLimit: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	go post(d, "first") // becomes the sender and blocks in Send
	<-be.entered
	post(d, "second") // waits for that sender
	d.Flush()
	require.Empty(t, be.sent(), "Flush does not wait for the sender in Send")
	drained := make(chan struct{})
	go func() { d.Drain(); close(drained) }()
	close(be.release)
	<-drained
	require.Equal(t, [][]string{{"first"}, {"second"}}, be.sent(), "both left before Drain returned")
	require.EqualValues(t, 2, d.Counters.SentPkts.Load(), "and sent_pkts counts them")
}

// blockingSender's first Send waits until release is closed.
type blockingSender struct {
	*pollOnly
	entered chan struct{}
	release chan struct{}
}

func (b *blockingSender) Send(pkts []backend.Outgoing) error {
	select {
	case b.entered <- struct{}{}:
		<-b.release
	default:
	}
	return b.pollOnly.Send(pkts)
}
