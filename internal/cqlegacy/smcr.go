package cqlegacy

import (
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2/device"
)

// SMCR is the design as smcr.Config.CQ takes it (an smcr.CQDesign), as
// Linux SMC-R ran it before the CQ pool: without the device, so that its
// tasklet is woken per completion event and runs on its own goroutine,
// every post leaving at once. (Given the device it would run to completion
// on the receive goroutine like the pool, which Linux never did:
// cq-bench's legacy-rtc.)
type SMCR struct{}

// NewAllocator starts the design; onOrphan takes the completions of
// unsignaled work requests, which only fail.
func (SMCR) NewAllocator(_ *device.Device, onOrphan func(*cq.WC)) cq.Allocator {
	return New(Config{OnOrphan: onOrphan})
}

func (SMCR) String() string { return "legacy" }
