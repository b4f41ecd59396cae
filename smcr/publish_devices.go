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

// publishDevices makes every stack's device, and every later one's,
// publish in dir for p.
func publishDevices(p *Publisher, dir string) {
	devicePublishing.Lock()
	devicePublishing.by, devicePublishing.dir = p, dir
	devicePublishing.Unlock()
	forEachStack(func(s *stack) { s.publishDevice() })
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
		forEachStack(func(s *stack) { s.dev.Unpublish() })
	}
}

func forEachStack(f func(*stack)) {
	stacks.Lock()
	defer stacks.Unlock()
	for _, s := range stacks.m {
		f(s)
	}
}

// publishDevice publishes the stack's device if the process publishes. A
// failure only costs the view: the error is dropped (a second Publish
// finds the device publishing already).
func (s *stack) publishDevice() {
	devicePublishing.Lock()
	on, dir := devicePublishing.by != nil, devicePublishing.dir
	devicePublishing.Unlock()
	if on {
		_ = s.dev.Publish(dir)
	}
}
