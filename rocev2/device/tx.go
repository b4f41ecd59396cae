package device

import (
	"net/netip"

	"github.com/goroce/goroce/rocev2"
)

// txSlot is the room for one packet: the largest IB MTU, the largest
// headers, pad and ICRC.
const txSlot = 4096 + 64

// TxBatch collects outgoing packets for one Backend.Send. It is owned by one
// goroutine at a time; its buffers are preallocated, so building and sending
// packets does not allocate.
type TxBatch struct {
	dev    *Device
	dgs    []rocev2.Datagram
	slab   []byte
	shared bool // the device's send batch (batch.go)
}

func newTxBatch(d *Device) *TxBatch {
	return &TxBatch{
		dev:  d,
		dgs:  make([]rocev2.Datagram, 0, d.batch),
		slab: make([]byte, d.batch*txSlot),
	}
}

// Buffer returns an empty buffer with room for one packet, flushing first
// when the batch is full. Append the packet to it and Commit it.
func (t *TxBatch) Buffer() []byte {
	if len(t.dgs) == cap(t.dgs) {
		t.Flush()
	}
	off := len(t.dgs) * txSlot
	return t.slab[off : off : off+txSlot]
}

// Commit queues pkt (built in the last Buffer) for dst.
func (t *TxBatch) Commit(pkt []byte, dst netip.AddrPort) {
	t.dgs = append(t.dgs, rocev2.Datagram{Buf: pkt, Addr: dst})
}

// Len returns the number of packets waiting.
func (t *TxBatch) Len() int { return len(t.dgs) }

// Flush sends the queued packets. A send error is counted (send_err), not
// returned: the packets count as lost, and RC recovers them.
func (t *TxBatch) Flush() {
	if len(t.dgs) == 0 {
		return
	}
	if err := t.dev.backend.Send(t.dgs); err != nil {
		t.dev.Counters.SendErr.Add(1)
	} else {
		t.dev.Counters.SentPkts.Add(uint64(len(t.dgs)))
	}
	clear(t.dgs)
	t.dgs = t.dgs[:0]
}

// flushWith sends t's packets and the held ones in o in one Backend.Send
// when they fit in one batch, and empties both. A single posted packet (a
// ping-pong reply) goes before the held ones, which is what holding them is
// for; a longer burst goes after them, so that the peer does not wait
// behind the burst for the ACKs of what it sent. (A kernel rxe peer, whose
// retransmit timer may fire early, was seen to retransmit when its ACK came
// behind 64 packets, and then on rare occasions to stall.)
func (t *TxBatch) flushWith(o *TxBatch) {
	first, then := t, o
	if len(t.dgs) > 1 {
		first, then = o, t
	}
	if len(first.dgs)+len(then.dgs) > cap(first.dgs) {
		first.Flush()
		then.Flush()
		return
	}
	first.dgs = append(first.dgs, then.dgs...) // then's buffers stay valid until it is cleared
	first.Flush()
	clear(then.dgs)
	then.dgs = then.dgs[:0]
}
