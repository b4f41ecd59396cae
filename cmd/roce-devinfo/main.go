// Command roce-devinfo prints a goroce device the way ibv_devinfo, the
// show_gids script and rdma statistic print a kernel RDMA device.
//
//	roce-devinfo [-d ADDR] [-udp-port N] [-v] [-i PORT]   ibv_devinfo [-v] layout
//	roce-devinfo -backend afpacket -i IFACE [-v]           a device on an interface (needs CAP_NET_RAW)
//	roce-devinfo -l                                        list devices
//	roce-devinfo -gids                                     show_gids layout
//	roce-devinfo -counters                                 rdma statistic counters
//	roce-devinfo [-j] [-d ADDR] res show qp|cq|mr|pd       rdma res show of running devices
//	roce-devinfo [-j] [-p] [-d ADDR] statistic              rdma statistic of running devices
//
// res show and statistic (options before the object, as rdma's) list the
// goroce devices that running programs publish, in iproute2 rdma's
// layout and, with -j, its JSON field names (lqpn, rqpn, type, state,
// rq-psn, sq-psn, path-mig-state, pdn, pid, comm; goroce adds path-mtu):
// every device of the user's processes (of every user's, for root), or
// those on -d's address. See views.go.
//
// A goroce device is not a kernel object that any process can query: it
// lives in the process that opened it. For -counters, roce-devinfo first
// asks a running device on -d's address and UDP port: one that publishes
// its counters (device.Publish; rc_pingpong and roce-perf do) answers on a
// Unix socket in device.RunDir(), believed only if the directory and the
// process serving the socket are the user's (a run directory or socket
// another user could control is an error, exit status 1). Otherwise, and
// for everything else, it opens a device of its own on that address and
// shows that one: its attributes and GID 1 are those any goroce device on
// that address has (GID 0 and the node GUID derive from its MAC, random
// for each device), but its counters are its own, all zero.
//
// With -backend afpacket (or -i IFACE) the device is on the interface, as
// an rxe device is: its MAC is the interface's, and so GID 0 is the
// interface's link-local address and the node GUID derives from it; the
// output ends with the interface and its MAC. -i takes a port number (as
// ibv_devinfo's) or an interface name.
//
// The exit status is 0 on success, 1 if the device cannot be opened (or
// the published counters cannot be trusted), 2 for bad flags and 4 for a
// port the device does not have (as ibv_devinfo).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/goroce/goroce/internal/backendflag"
	"github.com/goroce/goroce/internal/devinfo"
	"github.com/goroce/goroce/internal/rundir"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/rocev2/device"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// config holds the flags.
type config struct {
	addr         netip.Addr
	addrSet      bool // -d was given
	udpPort      uint16
	portExplicit bool // -udp-port was given: no fallback to an ephemeral port
	verbose      bool
	ibPort       int
	list         bool
	gids         bool
	counters     bool
	json, pretty bool // -j, -p: rdma's JSON and pretty output (res, statistic)
	backend      backendflag.Spec
	view         view // res or statistic, when hasView
	hasView      bool
}

// portOrIface is -i: a port number, as ibv_devinfo's, or an interface name.
type portOrIface struct{ c *config }

func (p portOrIface) String() string { return "" }

func (p portOrIface) Set(v string) error {
	if n, err := strconv.Atoi(v); err == nil {
		p.c.ibPort = n
		return nil
	}
	p.c.backend.Iface = v
	return nil
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var (
		c    config
		addr string
		port uint
	)
	fs := flag.NewFlagSet("roce-devinfo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "d", "127.0.0.1", "IP `address` to open the device on (goroce's device name is its address)")
	fs.UintVar(&port, "udp-port", rocev2.UDPPort, "RoCEv2 UDP `port` to bind (0: an ephemeral one); if the default is taken (by\na kernel rxe or another goroce program), an ephemeral port is used instead")
	fs.BoolVar(&c.verbose, "v", false, "print all the attributes of the device, and its GID table (ibv_devinfo -v)")
	fs.Var(portOrIface{&c}, "i", "print only port `N` (the device has port 1; 0: all ports), or with a name, the network\ninterface of the device (-backend afpacket; the address defaults to its first one)")
	fs.StringVar(&c.backend.Kind, "backend", backendflag.UDP, backendflag.FlagHelp)
	fs.BoolVar(&c.list, "l", false, "print only the device's name (ibv_devinfo -l)")
	fs.BoolVar(&c.gids, "gids", false, "print the GID table in the layout of the show_gids script")
	fs.BoolVar(&c.counters, "counters", false, "print the device's counters, one \"name value\" line each, as rdma statistic\n"+
		"does: those of the goroce program running on -d's address and -udp-port if\n"+
		"it publishes them (rc_pingpong and roce-perf do), else those of a device\n"+
		"roce-devinfo opens itself (all zero)")
	fs.BoolVar(&c.json, "j", false, "res, statistic: print rdma's JSON")
	fs.BoolVar(&c.pretty, "p", false, "statistic: one counter a line (rdma -p)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: roce-devinfo [flags]                       print the attributes of a goroce device\n"+
			"       roce-devinfo [-j] [-d ADDR] res show qp|cq|mr|pd   the live objects of running goroce devices (rdma res show)\n"+
			"       roce-devinfo [-j] [-p] [-d ADDR] statistic       their counters (rdma statistic show)\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	v, hasView, err := parseView(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "roce-devinfo: %v\n", err)
		fs.Usage()
		return c, errors.New("bad arguments")
	}
	c.view, c.hasView = v, hasView
	dSet := false
	fs.Visit(func(f *flag.Flag) { dSet = dSet || f.Name == "d" })
	c.addrSet = dSet
	a, err := netip.ParseAddr(addr)
	if err != nil {
		fmt.Fprintf(stderr, "roce-devinfo: -d %q: want the IP address of the device, e.g. -d 127.0.0.1\n", addr)
		return c, err
	}
	if dSet {
		c.backend.Addr = a
	}
	if err := c.backend.Check(); err != nil {
		fmt.Fprintln(stderr, "roce-devinfo:", err)
		return c, err
	}
	if !dSet && c.backend.Iface != "" {
		if a, err = backendflag.FirstAddr(c.backend.Iface); err != nil {
			fmt.Fprintln(stderr, "roce-devinfo:", err)
			return c, err
		}
	}
	if port > 65535 || c.ibPort < 0 {
		fmt.Fprintf(stderr, "roce-devinfo: -udp-port %d or -i %d out of range\n", port, c.ibPort)
		return c, errors.New("bad arguments")
	}
	c.addr, c.udpPort = a.Unmap(), uint16(port)
	fs.Visit(func(f *flag.Flag) { c.portExplicit = c.portExplicit || f.Name == "udp-port" })
	return c, nil
}

// run is roce-devinfo with its arguments and output streams, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if c.hasView {
		return runView(c, c.view, stdout, stderr)
	}
	if c.counters && !c.gids && !c.list && c.ibPort <= 1 && c.udpPort != 0 {
		p, err := readRunning(c)
		if errors.Is(err, rundir.ErrUntrusted) {
			fmt.Fprintln(stderr, "roce-devinfo: -counters:", err)
			return 1
		}
		if err == nil {
			if err := devinfo.WriteCounterList(stdout, p.Name, p.Counters); err != nil {
				fmt.Fprintln(stderr, "roce-devinfo:", err)
				return 1
			}
			return 0
		}
		fmt.Fprintf(stderr, "roce-devinfo: no running goroce device publishes counters for %v (in %s); showing a fresh device's counters (all zero)\n",
			netip.AddrPortFrom(c.addr, c.udpPort), device.RunDir())
	}
	dev, err := openDevice(c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "roce-devinfo:", err)
		return 1
	}
	defer dev.Close()
	if c.ibPort > dev.Attr().PhysPortCnt {
		fmt.Fprintln(stderr, "Invalid port requested for device")
		return 4
	}
	switch {
	case c.list:
		fmt.Fprintf(stdout, "1 HCA found:\n\t%s\n\n", dev.Name())
	case c.gids || c.counters:
		if c.gids {
			err = devinfo.WriteGIDs(stdout, dev)
		}
		if c.counters && err == nil {
			err = devinfo.WriteCounters(stdout, dev)
		}
	default:
		err = devinfo.WriteDevinfo(stdout, dev, c.verbose)
		if err == nil && c.backend.IsAFPacket() {
			name, mac := netdev(dev)
			_, err = fmt.Fprintf(stdout, "\tnetdev:\t\t\t\t%s (AF_PACKET), MAC %s\n\n", name, mac)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "roce-devinfo:", err)
		return 1
	}
	return 0
}

// readRunning reads the counters a running device on c.addr and c.udpPort
// publishes, if one does: in the user's run directory, or for root in
// any user's (each believed only as its owner's). A run directory or
// socket that another user could control is an error wrapping
// rundir.ErrUntrusted: its counters could be anyone's.
func readRunning(c config) (*device.Published, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ap := netip.AddrPortFrom(c.addr, c.udpPort)
	if path, uid := device.FindPublished(ap); path != "" {
		return device.ReadPublishedAs(ctx, path, uid)
	}
	return device.ReadPublished(ctx, device.PublishPath(device.RunDir(), ap))
}

// openDevice opens a device on c.addr and c.udpPort. When the default port
// is taken, which it is wherever a kernel rxe or another goroce program
// runs on the address, it opens on an ephemeral port instead and says so:
// the attributes and GIDs it prints do not depend on the port.
func openDevice(c config, stderr io.Writer) (*device.Device, error) {
	if c.backend.IsAFPacket() {
		b, _, err := backendflag.Open(c.backend, c.addr)
		if err != nil {
			return nil, err
		}
		dev, err := device.New(device.Config{Backend: b})
		if err != nil {
			b.Close()
			return nil, err
		}
		return dev, nil
	}
	dev, err := openOn(c.addr, c.udpPort)
	if err == nil {
		return dev, nil
	}
	if c.portExplicit || !errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%w (is another RoCE device on %v? try another -d address or -udp-port)", err, c.addr)
	}
	dev, err2 := openOn(c.addr, 0)
	if err2 != nil {
		return nil, fmt.Errorf("%w; an ephemeral port failed too: %w", err, err2)
	}
	fmt.Fprintf(stderr, "roce-devinfo: UDP port %d of %v is in use (by a kernel rxe or another goroce program?); showing a device on port %d instead\n",
		c.udpPort, c.addr, dev.LocalAddr().Port())
	return dev, nil
}

// openOn opens a device on a UDP socket bound to addr and port; port 0
// means an ephemeral port, as it does to udp.Open.
func openOn(addr netip.Addr, port uint16) (*device.Device, error) {
	b, err := udp.Open(udp.Config{Addr: netip.AddrPortFrom(addr, port)})
	if err != nil {
		return nil, fmt.Errorf("open %v port %d: %w", addr, port, err)
	}
	dev, err := device.New(device.Config{Backend: b})
	if err != nil {
		b.Close()
		return nil, err
	}
	return dev, nil
}

// netdev returns the interface of an AF_PACKET device and its MAC.
func netdev(dev *device.Device) (string, net.HardwareAddr) {
	mac := dev.MAC()
	name := "-"
	if ifi, ok := udp.InterfaceOf(dev.LocalAddr().Addr()); ok {
		name = ifi.Name
	}
	return name, net.HardwareAddr(mac[:])
}
