package devinfo

import (
	"io"

	"github.com/goroce/goroce/rocev2/device"
)

// WriteCounters prints d's counters as `rdma -p statistic show link DEV/1`
// prints rxe's: a "link NAME/1" line, then one indented "name value" line
// per counter, rxe's names first (see device.Counters.Snapshot). Scripts
// can take the counters with awk '/^ / {print $1, $2}'.
func WriteCounters(w io.Writer, d *device.Device) error {
	p := &printer{w: w}
	p.f("link %s/%d\n", d.Name(), 1)
	for _, c := range d.Counters.Snapshot() {
		p.f("    %s %d\n", c.Name, c.Value)
	}
	return p.err
}
