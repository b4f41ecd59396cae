package main

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/smcr"
)

// linkGroups is smcr linkgroup [show | link-show] [all | LG-ID]: a line
// per link group, or per link (a group of several links has a line for
// each), in smc-tools' columns, goroce's process and device after them.
func linkGroups(o *options, procs []*smcr.Published, args []string, w io.Writer) error {
	links := false
	if len(args) > 0 {
		switch {
		case isPrefix(args[0], "show"):
			args = args[1:]
		case isPrefix(args[0], "link-show"):
			links, args = true, args[1:]
		}
	}
	var want uint32
	filter := false
	if len(args) > 0 && !isPrefix(args[0], "all") {
		id, err := strconv.ParseUint(args[0], 16, 32)
		if err != nil {
			return fmt.Errorf("linkgroup: %q: want all or a link group id (hex, as listed)", args[0])
		}
		// As smc-tools: a link's id (LG-ID and link number) names its group.
		want, filter = uint32(id)&0xffffff00, true
	}
	if len(args) > 1 {
		return fmt.Errorf("linkgroup: unexpected %q", args[1])
	}
	var b strings.Builder
	b.WriteString(header(links, o.detail))
	for _, p := range procs {
		for _, g := range p.Groups {
			if filter && g.ID&0xffffff00 != want {
				continue
			}
			if !links {
				// VLAN: goroce's devices have none (C's %#4x of 0 is "0").
				fmt.Fprintf(&b, "%08x %-8s %-8s %4s  %6d  %-16s %-7d %v\n", g.ID, roleText(g.Role), g.Type, "0", g.Conns, "", p.PID, g.Device)
				continue
			}
			for _, l := range g.Links {
				dev := g.Device
				if l.Device.IsValid() {
					dev = l.Device // each link is on a device of its own
				}
				fmt.Fprintf(&b, "%08x %-8s %-8s %-15.15s %-15s %6d  ", g.ID, roleText(g.Role), g.Type, netDev(dev), l.State, l.Conns)
				if o.detail >= 1 {
					fmt.Fprintf(&b, "%08x  %08x  %-21s %4d  ", l.UID, l.PeerUserID, dev, 1)
					if o.detail >= 2 {
						fmt.Fprintf(&b, "%-40s  %-40s  %06x %06x  ", l.LocalGID, l.PeerGID, l.LocalQPN, l.PeerQPN)
					}
				}
				fmt.Fprintf(&b, "%d\n", p.PID)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func header(links bool, detail int) string {
	if !links {
		return "LG-ID    LG-Role  LG-Type  VLAN  #Conns  PNET-ID          PID     Device\n"
	}
	h := "LG-ID    LG-Role  LG-Type  Net-Dev         Link-State      #Conns  "
	if detail >= 1 {
		h += "Link-UID  Peer-UID  Device                IB-P  "
		if detail >= 2 {
			h += fmt.Sprintf("%-40s  %-40s  %-6s %-6s  ", "Local-GID", "Peer-GID", "QPN", "P-QPN")
		}
	}
	return h + "PID\n"
}

// roleText is smc-tools' role column.
func roleText(role string) string {
	if role == "server" {
		return "SERV"
	}
	return "CLNT"
}

// netDev is the interface that holds a link's device address, as Linux's
// link names the netdev of its RoCE port ("" if none does).
func netDev(dev netip.AddrPort) string {
	if ifi, ok := udp.InterfaceOf(dev.Addr()); ok {
		return ifi.Name
	}
	return ""
}
