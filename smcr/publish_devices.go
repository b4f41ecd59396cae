package smcr

import (
	"sync"
)

// Once the process publishes its SMC sockets (Publish), its SMC-R devices
// publish their counters and objects beside them (device.Publish), so that
// roce-devinfo's res show and statistic see the links' queue pairs as
// rdma res show sees a kernel's SMC-R QPs: the devices open then, and
// those that open later. A device publishes until it closes.
var devicePublishing struct {
	sync.Mutex
	on  bool
	dir string
}

// publishDevices makes every stack's device, and every later one's,
// publish in dir.
func publishDevices(dir string) {
	devicePublishing.Lock()
	devicePublishing.on, devicePublishing.dir = true, dir
	devicePublishing.Unlock()
	stacks.Lock()
	defer stacks.Unlock()
	for _, s := range stacks.m {
		s.publishDevice()
	}
}

// publishDevice publishes the stack's device if the process publishes. A
// failure only costs the view: the error is dropped (a second Publish
// finds the device publishing already).
func (s *stack) publishDevice() {
	devicePublishing.Lock()
	on, dir := devicePublishing.on, devicePublishing.dir
	devicePublishing.Unlock()
	if on {
		_ = s.dev.Publish(dir)
	}
}
