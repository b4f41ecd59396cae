package device

import (
	"sync"
	"sync/atomic"
)

// ACKer is a queue pair that owes its peer an ACK (Device.OweACK). The ACK
// itself is the queue pair's state (which PSN, which MSN); the device only
// decides when it is built, so that one ACK covers everything a receive
// batch, or several, asked to be acknowledged.
type ACKer interface {
	// SendOwedACK builds the ACK it owes, if it still owes one (a NAK or
	// READ response built meanwhile acknowledges as much), into the
	// device's outbox. It is called with no lock held.
	SendOwedACK()
}

// acks is the device's list of queue pairs that owe an ACK, and the hold
// that keeps them owed. When they are built:
//
//   - at the end of a receive batch, unless the device defers ACKs
//     (Config.DeferACKs): inside the batch's run, so they leave with the
//     batch's other answers;
//   - for a poller that got completions of what it received itself (a
//     hold): at its next call on the device (a post, Poll, Arm, Release),
//     after what it posts, in the same system call;
//   - with DeferACKs, when the queue pair's unacknowledged span reaches its
//     bound (the queue pair sends at once then), or by the backstop;
//   - by the backstop (Config.HoldLimit) in any case, and at Close.
type acks struct {
	mu    sync.Mutex
	owed  []ACKer
	spare []ACKer
	held  bool // a poller's hold keeps them owed

	// heldNow mirrors held for readers without mu (holders.go).
	heldNow atomic.Bool
}

// OweACK records that q owes its peer an ACK; q calls it under its own
// lock, once until SendOwedACK is called. The device builds it as the acks
// table says and arms the backstop, so that no ACK waits longer than
// HoldLimit.
func (d *Device) OweACK(q ACKer) {
	a := &d.acks
	a.mu.Lock()
	a.owed = append(a.owed, q)
	a.mu.Unlock()
	// Even where the receive batch's end builds it, that end may not come
	// soon (an end hook that blocks).
	d.out.arm()
}

// DefersACKs reports whether the device was configured with DeferACKs.
func (d *Device) DefersACKs() bool { return d.deferACKs }

// flush has every queue pair that owes an ACK build it.
func (a *acks) flush() {
	a.mu.Lock()
	list := a.owed
	if len(list) == 0 {
		a.mu.Unlock()
		return
	}
	a.owed, a.spare = a.spare, nil
	a.mu.Unlock()
	for _, q := range list {
		q.SendOwedACK()
	}
	clear(list)
	a.mu.Lock()
	if a.spare == nil {
		a.spare = list[:0]
	}
	a.mu.Unlock()
}

// pending reports whether some queue pair owes an ACK.
func (a *acks) pending() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.owed) > 0
}

// hold opens a poller's hold (see Device.progress).
func (a *acks) hold() {
	a.mu.Lock()
	a.setHeld(true)
	a.mu.Unlock()
}

// release ends a poller's hold; it reports whether there was one.
func (a *acks) release() bool {
	if !a.heldNow.Load() {
		return false
	}
	a.mu.Lock()
	was := a.held
	a.setHeld(false)
	a.mu.Unlock()
	return was
}

// setHeld opens or ends the hold. mu is held.
func (a *acks) setHeld(v bool) {
	if a.held == v {
		return
	}
	a.held = v
	a.heldNow.Store(v)
	if v {
		holdingDevices.Add(1)
	} else {
		holdingDevices.Add(-1)
	}
}

// releaseHold ends a poller's hold: the ACKs it kept are built and sent
// (after what the caller just posted, if it posted).
func (d *Device) releaseHold() {
	if d.acks.release() {
		d.acks.flush()
		d.Push()
	}
}

// Posted tells the device that a post has left its packets in the outbox,
// once the poster's locks are released: a post is a poller's next call, so
// it ends a hold, and what waits goes now unless a run defers it.
func (d *Device) Posted() {
	d.releaseHold()
	d.Push()
}
