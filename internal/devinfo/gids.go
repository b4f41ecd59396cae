package devinfo

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/rocev2/device"
)

// WriteGIDs prints d's GID table in the layout of the show_gids script:
// tab-separated DEV PORT INDEX GID IPv4 VER DEV, the GID in sysfs form
// (eight groups of four hex digits), then n_gids_found=N.
//
// The last column is the netdev that owns the device's address (on Linux
// loopback owns all of 127.0.0.0/8), or "-" when none does. Unlike the
// script, which takes any GID whose first group is 0000 for IPv4, the IPv4
// column is filled only for IPv4-mapped GIDs, so that ::1 is not shown as
// 0.0.0.1.
func WriteGIDs(w io.Writer, d *device.Device) error {
	p := &printer{w: w}
	p.f("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV\n")
	p.f("---\t----\t-----\t---\t\t\t\t\t------------ \t---\t---\n")
	ndev := netdevOf(d.LocalAddr().Addr())
	n := 0
	for _, g := range d.GIDs() {
		if g.GID.IsZero() || g.GID == (device.GID{0: 0xfe, 1: 0x80}) {
			continue // the script skips empty entries
		}
		ver := "v2" // the script greps "v2" out of sysfs's "RoCE v2"
		if a := netip.AddrFrom16(g.GID); a.Is4In6() {
			p.f("%s\t%d\t%d\t%s\t%s \t%s\t%s\n", d.Name(), 1, g.Index, SysfsGID(g.GID), a.Unmap(), ver, ndev)
		} else {
			p.f("%s\t%d\t%d\t%s\t\t\t%s\t%s\n", d.Name(), 1, g.Index, SysfsGID(g.GID), ver, ndev)
		}
		n++
	}
	p.f("n_gids_found=%d\n", n)
	return p.err
}

// SysfsGID formats a GID as /sys/class/infiniband/*/ports/*/gids/* does:
// fe80:0000:0000:0000:0200:7fff:fe00:0001.
func SysfsGID(g device.GID) string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

// netdevOf returns the name of the interface that owns addr, "-" if none
// does.
func netdevOf(addr netip.Addr) string {
	if ifi, ok := udp.InterfaceOf(addr); ok {
		return ifi.Name
	}
	return "-"
}
