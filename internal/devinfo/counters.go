package devinfo

import (
	"io"

	"github.com/goroce/goroce/rocev2/device"
)

// WriteCounters prints d's counters as `rdma -p statistic show link DEV/1`
// prints rxe's: a "link NAME/1" line, then one indented "name value" line
// per counter, rxe's names first (see device.Counters.Snapshot). Scripts
// can take the counters with awk '/^ / {print $1, $2}'. What waits in the
// device's outbox is sent first (Drain): a UD or UC send completes once
// its packet is built, and a tool that prints the counters after its last
// completion would miss that packet in sent_pkts.
func WriteCounters(w io.Writer, d *device.Device) error {
	d.Drain()
	return WriteCounterList(w, d.Name(), d.Counters.Snapshot())
}

// WriteCounterList prints named counters in WriteCounters' layout, for a
// device known by name only (one another process publishes).
func WriteCounterList(w io.Writer, name string, counters []device.Counter) error {
	p := &printer{w: w}
	p.f("link %s/%d\n", name, 1)
	for _, c := range counters {
		p.f("    %s %d\n", c.Name, c.Value)
	}
	return p.err
}
