package device

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// Outbox is the one place a device's outgoing packets wait: every packet a
// queue pair builds, whoever makes it build (a post, the receive path's
// ACKs and READ responses, a timer's retransmission), is built straight into
// the outbox's preallocated slots and leaves in one Backend.Send with the
// others waiting there. Packets leave in the order they were built, so a
// QP's packets always leave in PSN order whoever flushes.
//
// When the outbox sends:
//
//	what is going on                      an append (Done)    sent when
//	────────────────                      ────────────────    ─────────
//	nothing                               sends at once       at once
//	a run is open: a receive batch        waits               the last run ends
//	  (with its end hooks: completion
//	  handlers run to completion), or a
//	  pool's completion run
//	a poller's hold (Poller.Poll got      waits               the holder's next call: a post
//	  completions after receiving them                         (DonePost), Poller.Poll or Arm,
//	  itself), or a receive batch's hold                       Release; Poller.Poll or Arm on
//	  of plain ACKs (Config.DeferACKs)                         another device (holders.go); or
//	                                                            the device's Close
//	any of the above                      waits               the backstop: HoldLimit after
//	                                                            the first packet that waited
//	the slots are full                    sends first         at once (back-pressure: the
//	                                                            builder sends, nothing allocates)
//
// Every path that defers a packet arms the backstop, so nothing waits
// longer than HoldLimit, even if a completion handler blocks inside a run
// or a poller never calls again.
//
// Locking: the outbox's mutex is the device's innermost lock. Builders take
// it (Device.Outbox) while holding their QP's lock; it is held while a
// packet is built and while a batch is sent, and nothing else is locked
// under it but the timer service's own mutex.
type Outbox struct {
	dev   *Device
	mu    sync.Mutex
	dgs   []backend.Outgoing
	slab  []byte
	limit time.Duration

	// Guarded by mu.
	from     backend.Sender // who builds now (OutboxFor), stamped on each packet
	runs     int            // open runs
	held     bool           // a poller's hold is open (set through setHeld)
	armed    bool           // the backstop is armed
	backstop Timer

	// heldNow mirrors held for readers without mu (holders.go).
	heldNow atomic.Bool
}

// txSlot is the room for one packet: the largest IB MTU, the largest
// headers, pad and ICRC.
const txSlot = 4096 + 64

func newOutbox(d *Device, limit time.Duration) *Outbox {
	o := &Outbox{
		dev:   d,
		dgs:   make([]backend.Outgoing, 0, d.batch),
		slab:  make([]byte, d.batch*txSlot),
		limit: limit,
	}
	o.backstop.Init(o.onBackstop)
	return o
}

// Outbox takes the device's outbox for the caller to build packets into
// with Buffer and Commit; Done or DonePost gives it back. Queue pairs call
// it under their own lock (and only then: see the lock order above).
func (d *Device) Outbox() *Outbox { return d.OutboxFor(backend.Sender{}) }

// OutboxFor is Outbox for a queue pair: every packet committed until Done
// carries s, which a backend that builds the IP and UDP headers itself
// needs (the QP's number gives the UDP source port; its address vector the
// flow label, hop limit and traffic class).
func (d *Device) OutboxFor(s backend.Sender) *Outbox {
	o := d.out
	o.mu.Lock()
	o.from = s
	return o
}

// SetSender changes what the packets committed from now on carry: a UD QP's
// packets each follow their work request's address handle.
func (o *Outbox) SetSender(s backend.Sender) { o.from = s }

// Buffer returns an empty buffer with room for one packet, sending what
// waits first when the slots are full. Append the packet to it and Commit
// it.
func (o *Outbox) Buffer() []byte {
	if len(o.dgs) == cap(o.dgs) {
		o.send()
	}
	off := len(o.dgs) * txSlot
	return o.slab[off : off : off+txSlot]
}

// Commit queues pkt (built in the last Buffer) for dst.
func (o *Outbox) Commit(pkt []byte, dst netip.AddrPort) {
	o.dgs = append(o.dgs, backend.Outgoing{Buf: pkt, Dst: dst, Sender: o.from})
}

// Len returns the number of packets waiting.
func (o *Outbox) Len() int { return len(o.dgs) }

// Flush sends what waits now, open runs or not: a receive path that has
// more packets to read sends the answers to the ones it has handled.
func (o *Outbox) Flush() { o.send() }

// Done gives the outbox back after an append by the receive path or a
// timer: it sends what waits unless a run or a hold defers it.
func (o *Outbox) Done() {
	o.settle()
	o.mu.Unlock()
}

// DonePost gives the outbox back after a post: a post is the holder's next
// call, so it ends a poller's hold, and what the hold kept goes with the
// posted packets in one system call.
func (o *Outbox) DonePost() {
	o.setHeld(false)
	o.settle()
	o.mu.Unlock()
}

// leadLoneRequest puts a lone request before the responses it leaves with.
// Holding ACKs back is for the sake of the reply a poller posts next (a
// ping-pong's, a completion handler's): the peer waits for that reply, and
// the ACKs only complete the peer's own sends. Two requests or more stay in
// build order after the responses, so that a burst does not delay the
// peer's ACKs behind it (a kernel rxe peer was seen to retransmit early
// when its ACK came behind 64 packets). Moving a request ahead of responses
// never reorders a PSN sequence: requests and responses are numbered in
// different spaces.
func (o *Outbox) leadLoneRequest() {
	req := -1
	for i := range o.dgs {
		if b := o.dgs[i].Buf; len(b) > 0 && rocev2.Opcode(b[0]).Is(rocev2.OpRequest) {
			if req >= 0 {
				return
			}
			req = i
		}
	}
	if req <= 0 {
		return
	}
	r := o.dgs[req]
	copy(o.dgs[1:req+1], o.dgs[:req])
	o.dgs[0] = r
}

// settle sends what waits unless something defers it, in which case the
// backstop is armed. mu is held.
func (o *Outbox) settle() {
	if len(o.dgs) == 0 {
		return
	}
	if o.runs == 0 && !o.held {
		o.send()
		return
	}
	if !o.armed {
		o.armed = true
		o.dev.timers.Reset(&o.backstop, o.limit)
	}
}

// send hands what waits to the backend. A send error is counted (send_err),
// not returned: the packets count as lost, and RC recovers them. mu is held.
func (o *Outbox) send() {
	if len(o.dgs) == 0 {
		return
	}
	o.leadLoneRequest()
	if err := o.dev.backend.Send(o.dgs); err != nil {
		o.dev.Counters.SendErr.Add(1)
	} else {
		o.dev.Counters.SentPkts.Add(uint64(len(o.dgs)))
	}
	clear(o.dgs)
	o.dgs = o.dgs[:0]
	// An armed backstop stays armed: when it fires it finds nothing to
	// send (or newer packets, which may go early). Stopping and re-arming
	// it for every held ACK of a ping-pong would cost a timer update per
	// message; this way a busy device arms it at most once a HoldLimit.
}

// beginRun opens a run: appends wait until the last open run ends.
func (o *Outbox) beginRun() {
	o.mu.Lock()
	o.runs++
	o.mu.Unlock()
}

// endRun closes a run and sends what waits if it was the last and no hold
// is open.
func (o *Outbox) endRun() {
	o.mu.Lock()
	o.runs--
	o.settle()
	o.mu.Unlock()
}

// setHeld opens or ends a poller's hold. mu is held.
func (o *Outbox) setHeld(v bool) {
	if o.held == v {
		return
	}
	o.held = v
	o.heldNow.Store(v)
	if v {
		holdingDevices.Add(1)
	} else {
		holdingDevices.Add(-1)
	}
}

// hold opens a poller's hold (see Device.progress).
func (o *Outbox) hold() {
	o.mu.Lock()
	o.setHeld(true)
	o.mu.Unlock()
}

// release ends a poller's hold and sends what it kept, unless a run is
// open.
func (o *Outbox) release() {
	o.mu.Lock()
	if o.held {
		o.setHeld(false)
		o.settle()
	}
	o.mu.Unlock()
}

// holdACKs ends a receive batch on a device that defers ACKs
// (Config.DeferACKs): when everything waiting is plain ACKs, a hold keeps
// them for the next post (or the backstop); anything else ends the hold,
// and all of it goes when the batch's run ends.
func (o *Outbox) holdACKs() {
	o.mu.Lock()
	if len(o.dgs) > 0 {
		o.setHeld(o.onlyACKs())
	}
	o.mu.Unlock()
}

// onlyACKs reports whether every waiting packet is an RC ACK (an
// ACKNOWLEDGE whose AETH syndrome is ACK, not a NAK). mu is held.
func (o *Outbox) onlyACKs() bool {
	for i := range o.dgs {
		b := o.dgs[i].Buf
		if len(b) < rocev2.BTHLen+rocev2.AETHLen || rocev2.Opcode(b[0]) != rocev2.RCAcknowledge || b[rocev2.BTHLen]&0x60 != 0 {
			return false
		}
	}
	return true
}

// onBackstop runs on the timer goroutine HoldLimit after a packet began to
// wait: whatever waits goes now, and a hold it belonged to is over.
func (o *Outbox) onBackstop() {
	o.mu.Lock()
	o.armed = false
	o.setHeld(false)
	o.send()
	o.mu.Unlock()
}

// close ends any hold and sends what waits (the device is closing).
func (o *Outbox) close() {
	o.mu.Lock()
	o.setHeld(false)
	o.send()
	o.mu.Unlock()
}
