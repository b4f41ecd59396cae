package qp

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/device"
)

// ackCounter counts the RC ACKs (ACKNOWLEDGE with an ACK syndrome) each
// wrapped backend sends, by its address.
type ackCounter struct {
	mu   sync.Mutex
	acks map[string]int
}

func (c *ackCounter) wrap(b backend.Backend) backend.Backend {
	return backend.KeepPolling(&countingACKs{Backend: b, c: c}, b, func([]backend.Incoming) {})
}

func (c *ackCounter) count(n *node) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acks[n.dev.LocalAddr().String()]
}

type countingACKs struct {
	backend.Backend
	c *ackCounter
}

func (b *countingACKs) Send(pkts []backend.Outgoing) error {
	b.c.mu.Lock()
	for _, p := range pkts {
		var pkt rocev2.Packet
		if pkt.Parse(p.Buf) == nil && pkt.Opcode() == rocev2.RCAcknowledge && pkt.AETH().Syndrome().Kind() == rocev2.KindACK {
			b.c.acks[b.LocalAddr().String()]++
		}
	}
	b.c.mu.Unlock()
	return b.Backend.Send(pkts)
}

func (b *countingACKs) Unwrap() backend.Backend { return b.Backend }

// With DeferACKs, an ACK covers the messages of several receive batches:
// none is sent while the owed span is short of its bound, one when it
// reaches it, and a QP that is destroyed sends what it owes first (the
// peer would retransmit it otherwise). No backstop interferes: an hour.
func TestDeferredACKsCoverManyMessages(t *testing.T) {
	counter := &ackCounter{acks: map[string]int{}}
	a, b := newPair(t, pairConfig{wrap: counter.wrap, depth: 64,
		device: device.Config{DeferACKs: true, HoldLimit: time.Hour}})
	for i := range 2 * maxOwedSpan {
		_, err := b.qp.PostRecv([]RecvWR{{WRID: uint64(i), SGL: []SGE{b.sge(0, 64)}}})
		require.NoError(t, err)
	}
	send := func(n int) {
		for range n {
			_, err := a.qp.PostSend([]SendWR{{Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{a.sge(0, 8)}}})
			require.NoError(t, err)
		}
	}
	recvs := func(n int) {
		for _, wc := range waitWCs(t, b.cq, n, 30*time.Second) {
			require.Equal(t, cq.Success, wc.Status)
		}
	}

	send(maxOwedSpan - 1) // PSNs up to one short of the bound
	recvs(maxOwedSpan - 1)
	assert.Zero(t, counter.count(b), "short of the bound: the ACK stays owed")
	requireNoWC(t, a.cq)

	send(1) // the bound
	recvs(1)
	sends := waitWCs(t, a.cq, maxOwedSpan, 30*time.Second)
	assert.Len(t, sends, maxOwedSpan, "one ACK completes every send")
	assert.Equal(t, 1, counter.count(b), "one ACK for %d messages", maxOwedSpan)

	send(1)
	recvs(1)
	require.Equal(t, 1, counter.count(b), "owed again")
	require.NoError(t, b.qp.Destroy())
	waitWCs(t, a.cq, 1, 30*time.Second)
	assert.Equal(t, 2, counter.count(b), "destroying the QP sent what it owed")
}

// Without DeferACKs a device acknowledges at the end of each receive
// batch: however the requests are batched, at most one ACK per batch,
// where every request here asks for one (each is a message of its own).
// The backstop is an hour away: on a busy machine a batch can outlast the
// default millisecond, and the backstop then sends the ACK owed so far in
// the middle of it (right, but not what this test counts).
func TestACKsAtTheEndOfEachBatch(t *testing.T) {
	counter := &ackCounter{acks: map[string]int{}}
	a, b := newPair(t, pairConfig{wrap: counter.wrap, depth: 64,
		device: device.Config{HoldLimit: time.Hour}})
	var batches atomic.Int32
	b.dev.OnReceiveBatch(func() {}, func() { batches.Add(1) })
	const n = 32
	for i := range n {
		_, err := b.qp.PostRecv([]RecvWR{{WRID: uint64(i), SGL: []SGE{b.sge(0, 64)}}})
		require.NoError(t, err)
	}
	wrs := make([]SendWR, n)
	for i := range wrs {
		wrs[i] = SendWR{Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{a.sge(0, 8)}}
	}
	_, err := a.qp.PostSend(wrs) // one post: the packets leave in one send batch
	require.NoError(t, err)
	waitWCs(t, b.cq, n, 30*time.Second)
	waitWCs(t, a.cq, n, 30*time.Second)
	acks := counter.count(b)
	assert.Positive(t, acks)
	assert.LessOrEqual(t, acks, int(batches.Load()), "one ACK per receive batch at most")
	t.Logf("%d requests in %d receive batches, %d ACKs", n, batches.Load(), acks)
}
