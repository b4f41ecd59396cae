package smcr

import (
	"sync"
)

// While the process publishes its SMC sockets (a Publisher), its SMC-R
// devices publish their counters and objects beside them (device.Publish),
// so that roce-devinfo's res show and statistic see the links' queue
// pairs as rdma res show sees a kernel's SMC-R QPs: the devices open then,
// and those that open later, until the Publisher closes.
var devicePublishing struct {
	sync.Mutex
	by  *Publisher // nil: not publishing
	dir string
}

// publishDevices makes every device, and every later one, publish in dir
// for p.
func publishDevices(p *Publisher, dir string) {
	devicePublishing.Lock()
	devicePublishing.by, devicePublishing.dir = p, dir
	devicePublishing.Unlock()
	forEachDevice((*smcDevice).publish)
}

// unpublishDevices stops the devices publishing, if p made them.
func unpublishDevices(p *Publisher) {
	devicePublishing.Lock()
	mine := devicePublishing.by == p
	if mine {
		devicePublishing.by = nil
	}
	devicePublishing.Unlock()
	if mine {
		forEachDevice(func(d *smcDevice) { d.dev.Unpublish() })
	}
}

func forEachDevice(f func(*smcDevice)) {
	devices.Lock()
	defer devices.Unlock()
	for _, d := range devices.m {
		f(d)
	}
}

// publish publishes the device if the process publishes. A failure only
// costs the view: the error is dropped (a second Publish finds the device
// publishing already).
func (d *smcDevice) publish() {
	devicePublishing.Lock()
	on, dir := devicePublishing.by != nil, devicePublishing.dir
	devicePublishing.Unlock()
	if on {
		_ = d.dev.Publish(dir)
	}
}
