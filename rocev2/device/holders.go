package device

import (
	"sync"
	"sync/atomic"
)

// A poller's hold must end when the goroutine that made it goes on to
// something else, and Go cannot tell goroutines apart. The case that
// matters: a goroutine takes a completion from a Poller of device A (A now
// holds the ACKs it received) and then polls, or arms and sleeps on, a CQ
// of device B, waiting for something that needs A's ACK to happen first (a
// client with connections on two devices; a test driving both ends of a
// connection from one goroutine). Without help, A's ACK would wait for the
// backstop, a millisecond per exchange. So every Poller.Poll that drives
// its device, and every Poller.Arm, ends the holds of the process's other
// devices first. The process-wide list below exists for that alone; while
// no device holds anything (holdingDevices is 0) it costs one atomic load.

var (
	liveMu      sync.Mutex
	liveDevices atomic.Pointer[[]*Device] // copy on write
	// holdingDevices counts the devices with a poller's hold open.
	holdingDevices atomic.Int32
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

// releaseOthers ends the holds of the process's devices other than d.
func releaseOthers(d *Device) {
	if holdingDevices.Load() == 0 || (holdingDevices.Load() == 1 && d.acks.heldNow.Load()) {
		return
	}
	p := liveDevices.Load()
	if p == nil {
		return
	}
	for _, o := range *p {
		if o != d && o.acks.heldNow.Load() {
			o.releaseHold()
		}
	}
}
