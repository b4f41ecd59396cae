package smcr

import (
	"net/netip"

	"github.com/goroce/goroce/cq"
)

// DeviceStats are the counters of one SMC-R device of this process, for
// benchmarks and monitoring: how its completions reached their handlers
// and how many link groups it holds.
type DeviceStats struct {
	// CQ sums the counters of the device's completion design (a cq.Pool,
	// or the design a benchmark brought): CQ.CompsPerWakeup is the completions handled per poller
	// wake-up, the figure the CQ-pooling change is about.
	CQ cq.PoolStats
	// Design names the device's completion design (CQDesign.String).
	Design string
	// BusyPolled is the datagrams that busy-polling Reads took from the
	// device themselves (Config.BusyPoll): the device's busy_polled_pkts.
	BusyPolled uint64
	// LentWaits is the Reads that served the device themselves while
	// they waited (one wake-up per message instead of two), and
	// LentWaitBackstops how often nobody served it for the device's
	// hold limit after one: its lent_waits and lent_wait_backstops.
	LentWaits, LentWaitBackstops uint64
	// LinkGroups is how many link groups have a link on the device,
	// lingering ones included.
	LinkGroups int
}

// StatsOfDevice returns the counters of the SMC-R device on addr (port 0:
// 4791), or ok false when the process has no such device open (none was
// opened, or the last listener, connection and link group using it have
// gone, which closes it).
func StatsOfDevice(addr netip.Addr, port uint16) (st DeviceStats, ok bool) {
	if port == 0 {
		port = 4791
	}
	devices.Lock()
	d := devices.m[netip.AddrPortFrom(addr.Unmap(), port)]
	devices.Unlock()
	if d == nil {
		return DeviceStats{}, false
	}
	return DeviceStats{
		CQ: d.cqs.Stats(), Design: d.design.String(), LinkGroups: d.linkGroups(),
		BusyPolled:        d.dev.Counters.BusyPolledPkts.Load(),
		LentWaits:         d.dev.Counters.LentWaits.Load(),
		LentWaitBackstops: d.dev.Counters.LentWaitBackstops.Load(),
	}, true
}
