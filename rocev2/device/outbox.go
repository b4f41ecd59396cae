package device

import (
	"net/netip"
	"sync"
	"time"

	"github.com/goroce/goroce/rocev2/backend"
)

// Outbox is the one place a device's outgoing packets wait: every packet a
// queue pair builds, whoever makes it build (a post, the receive path's
// NAKs and READ responses, an owed ACK, a timer's retransmission), is
// built straight into the outbox's preallocated slots and leaves in one
// Backend.Send with the others waiting there. When packets go is the table
// "The outbox" in docs/ARCHITECTURE.md.
//
// Packets leave in the order they were built, whoever sends: one goroutine
// at a time is the sender (sending), and it also sends what becomes due
// while it is in Backend.Send, so concurrent posts combine into one system
// call instead of queueing behind each other's. The outbox's lock is never
// held during Backend.Send: builders hand their batch to the sender and go
// on (Release, then Device.Push once their own locks are released).
type Outbox struct {
	dev   *Device
	limit time.Duration

	mu    sync.Mutex
	cur   *txBatch  // being built
	spare *txBatch  // nil while the sender has it in Backend.Send
	room  sync.Cond // signalled when the sender gives its batch back (L: mu)

	// Guarded by mu.
	from     backend.Sender // who builds now (OutboxFor), stamped on each packet
	runs     int            // open runs
	sending  bool           // a goroutine is the sender
	force    bool           // send what waits now, runs or not (Flush)
	armed    bool           // the backstop is armed
	backstop Timer
}

// txBatch is one send batch: a slot per packet, the largest packet fits.
type txBatch struct {
	dgs  []backend.Outgoing
	slab []byte
}

// txSlot is the room for one packet: the largest IB MTU, the largest
// headers, pad and ICRC.
const txSlot = 4096 + 64

func newTxBatch(n int) *txBatch {
	return &txBatch{dgs: make([]backend.Outgoing, 0, n), slab: make([]byte, n*txSlot)}
}

func newOutbox(d *Device, limit time.Duration) *Outbox {
	o := &Outbox{dev: d, limit: limit, cur: newTxBatch(d.batch), spare: newTxBatch(d.batch)}
	o.room.L = &o.mu
	o.backstop.Init(d.onBackstop)
	return o
}

// Outbox takes the device's outbox for the caller to build packets into
// with Buffer and Commit; Release or Done gives it back.
func (d *Device) Outbox() *Outbox { return d.OutboxFor(backend.Sender{}) }

// OutboxFor is Outbox for a queue pair: every packet committed until it is
// given back carries s, which a backend that builds the IP and UDP headers
// itself needs (the QP's number gives the UDP source port; its address
// vector the flow label, hop limit and traffic class). Queue pairs call it
// under their own lock, and nothing else is locked under the outbox's.
func (d *Device) OutboxFor(s backend.Sender) *Outbox {
	o := d.out
	o.mu.Lock()
	o.from = s
	return o
}

// SetSender changes what the packets committed from now on carry: a UD QP's
// packets each follow their work request's address handle.
func (o *Outbox) SetSender(s backend.Sender) { o.from = s }

// Buffer returns an empty buffer with room for one packet. Append the
// packet to it and Commit it; the buffer is the outbox's, valid until the
// outbox is given back. When every slot is taken the packets waiting are
// sent first (back-pressure: nothing allocates), by this goroutine, or by
// the sender it then waits for.
func (o *Outbox) Buffer() []byte {
	for len(o.cur.dgs) == cap(o.cur.dgs) {
		if o.sending {
			from := o.from // another builder may take the outbox meanwhile
			o.room.Wait()
			o.from = from
			continue
		}
		o.sendLocked()
	}
	off := len(o.cur.dgs) * txSlot
	return o.cur.slab[off : off : off+txSlot]
}

// Commit queues pkt (built in the last Buffer) for dst.
func (o *Outbox) Commit(pkt []byte, dst netip.AddrPort) {
	o.cur.dgs = append(o.cur.dgs, backend.Outgoing{Buf: pkt, Dst: dst, Sender: o.from})
}

// Release gives the outbox back. It reports whether what waits is due now,
// in which case the caller, once it has released its own locks, calls
// Device.Push: no system call is made under a queue pair's lock.
func (o *Outbox) Release() (due bool) {
	due = o.dueLocked() && !o.sending
	if !due && len(o.cur.dgs) > 0 && o.runs > 0 {
		o.armLocked()
	}
	o.mu.Unlock()
	return due
}

// Done gives the outbox back and sends what is due: for builders that hold
// no lock of their own.
func (o *Outbox) Done() {
	if o.Release() {
		o.push(false)
	}
}

// dueLocked reports whether what waits should go now. mu is held.
func (o *Outbox) dueLocked() bool {
	return len(o.cur.dgs) > 0 && (o.runs == 0 || o.force)
}

// push sends what is due, unless another goroutine is the sender (it will
// send it). force sends what waits inside runs too.
func (o *Outbox) push(force bool) {
	o.mu.Lock()
	if force {
		o.force = true
	}
	if !o.sending {
		for o.dueLocked() {
			o.sendLocked()
		}
	}
	o.mu.Unlock()
}

// sendLocked hands the batch being built to Backend.Send, with mu
// released for the call, and takes the batch back. mu is held and nobody
// else is the sender. A send error is counted (send_err), not returned:
// the packets count as lost, and RC recovers them.
func (o *Outbox) sendLocked() {
	o.sending = true
	b := o.cur
	o.cur, o.spare = o.spare, nil
	o.force = false
	o.mu.Unlock()
	if err := o.dev.backend.Send(b.dgs); err != nil {
		o.dev.Counters.SendErr.Add(1)
	} else {
		o.dev.Counters.SentPkts.Add(uint64(len(b.dgs)))
	}
	clear(b.dgs) // do not keep the backend's view of the buffers alive
	b.dgs = b.dgs[:0]
	o.mu.Lock()
	o.spare = b
	o.sending = false
	o.room.Broadcast()
	// An armed backstop stays armed: when it fires it finds nothing to
	// send (or newer packets, which may go early). Stopping and re-arming
	// it per packet would cost a timer update per message; this way a
	// busy device arms it at most once a HoldLimit.
}

// armLocked arms the backstop if it is not armed. mu is held.
func (o *Outbox) armLocked() {
	if !o.armed {
		o.armed = true
		o.dev.timers.Reset(&o.backstop, o.limit)
	}
}

// arm arms the backstop (something waits for a hold or a run).
func (o *Outbox) arm() {
	o.mu.Lock()
	o.armLocked()
	o.mu.Unlock()
}

// beginRun opens a run: appends wait until the last open run ends.
func (o *Outbox) beginRun() {
	o.mu.Lock()
	o.runs++
	o.mu.Unlock()
}

// endRun closes a run; the last one to end sends what waits.
func (o *Outbox) endRun() {
	o.mu.Lock()
	o.runs--
	due := o.dueLocked() && !o.sending
	o.mu.Unlock()
	if due {
		o.push(false)
	}
}

// Push sends what waits in the outbox unless a run defers it: a queue pair
// calls it once its locks are released, when Outbox.Release said so.
func (d *Device) Push() { d.out.push(false) }

// Flush sends what waits now, open runs or not: a receive path that has
// more packets to read sends the answers to the ones it has handled.
func (d *Device) Flush() { d.out.push(true) }

// Drain sends whatever waits, runs or not, and returns once it has left:
// every packet built before the call has been handed to Backend.Send, by
// this goroutine or by the sender that was in Backend.Send meanwhile. A
// UD or UC send completes once its packet is built, before it leaves; a
// program that reads the device's counters after its last completion
// (the tools' -stats, through devinfo.WriteCounters) drains first, or
// sees the last packets missing from sent_pkts.
func (d *Device) Drain() {
	o := d.out
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		switch {
		case o.sending:
			o.room.Wait() // the sender gives its batch back, then we look again
		case len(o.cur.dgs) > 0:
			o.force = true
			o.sendLocked()
		default:
			return
		}
	}
}

// onBackstop runs on the timer goroutine HoldLimit after something began
// to wait: owed ACKs are built and whatever waits goes now, runs or holds
// notwithstanding.
func (d *Device) onBackstop() {
	d.out.mu.Lock()
	d.out.armed = false
	d.out.mu.Unlock()
	d.acks.release()
	d.acks.flush()
	d.Flush()
}
