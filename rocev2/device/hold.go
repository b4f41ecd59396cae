package device

import (
	"sync"
	"sync/atomic"
	"time"
)

// Held responses (see Progress): a device holds back the packets that the
// packets a poller received call for, so that the poller's reply leaves
// first. Holding must never strand them, so besides the caller's own next
// device call, two things release them:
//
//   - Progress on any other device of the process releases what every
//     device holds: a goroutine that takes a completion from one device and
//     then polls another (a client waiting on a second connection, a test
//     driving both ends) would otherwise wait for an ACK held by the first.
//   - A backstop timer on the device's timer goroutine: while holds happen
//     it ticks every holdBackstop and releases whatever is held, so an
//     application that stops touching the device delays its ACKs by at most
//     two ticks. It is armed when holding starts, not per hold, so a busy
//     ping-pong does not wake the timer goroutine per message.
const holdBackstop = time.Millisecond

// liveDevices lists the open devices for releaseOthers (copy on write).
var (
	liveMu      sync.Mutex
	liveDevices atomic.Pointer[[]*Device]
)

func register(d *Device) {
	liveMu.Lock()
	defer liveMu.Unlock()
	var list []*Device
	if p := liveDevices.Load(); p != nil {
		list = append(list, *p...)
	}
	list = append(list, d)
	liveDevices.Store(&list)
}

func unregister(d *Device) {
	liveMu.Lock()
	defer liveMu.Unlock()
	p := liveDevices.Load()
	if p == nil {
		return
	}
	list := make([]*Device, 0, len(*p))
	for _, o := range *p {
		if o != d {
			list = append(list, o)
		}
	}
	liveDevices.Store(&list)
}

// releaseOthers releases what the process's other devices hold.
func (d *Device) releaseOthers() {
	p := liveDevices.Load()
	if p == nil {
		return
	}
	for _, o := range *p {
		if o != d && o.rxHeld.Load() {
			o.Release()
		}
	}
}

// holdState is a device's backstop timer state.
type holdState struct {
	tm    Timer
	seq   atomic.Uint64 // counts holds
	armed atomic.Bool
	seen  uint64 // seq at the last tick; timer goroutine only
}

// noteHold records a hold and arms the backstop if it is not running.
func (d *Device) noteHold() {
	d.hold.seq.Add(1)
	if !d.hold.armed.Load() && d.hold.armed.CompareAndSwap(false, true) {
		d.timers.Reset(&d.hold.tm, holdBackstop)
	}
}

// onHoldTick runs on the timer goroutine: release what is held, and keep
// ticking while holds keep happening.
func (d *Device) onHoldTick() {
	seq := d.hold.seq.Load()
	d.Release()
	if d.sb.open.Load() > 0 { // a run that takes this long: send what its posts built
		d.flushBatch()
	}
	if seq != d.hold.seen {
		d.hold.seen = seq
		d.timers.Reset(&d.hold.tm, holdBackstop)
		return
	}
	d.hold.armed.Store(false)
	// A hold between the load above and the store: it saw armed set and
	// did not arm, so arm for it.
	if d.hold.seq.Load() != seq && d.hold.armed.CompareAndSwap(false, true) {
		d.timers.Reset(&d.hold.tm, holdBackstop)
	}
}
