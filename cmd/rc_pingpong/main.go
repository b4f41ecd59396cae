// Command rc_pingpong is rdma-core's ibv_rc_pingpong on a goroce device: it
// runs the same RC SEND ping-pong with the same options, out-of-band
// exchange and output, so that it interoperates with the real program on a
// kernel RoCE device (rxe or an RNIC) as well as with itself.
//
//	rc_pingpong [options]            start a server and wait for a client
//	rc_pingpong [options] SERVER     connect to the server at SERVER
//
// Differences from the original, all because a goroce device is a UDP
// socket in this process rather than a kernel device:
//
//   - -d takes the IP address to bind the device to (default: the source
//     address of the route to SERVER; 127.0.0.1 for a server);
//   - -udp-port sets the RoCEv2 UDP port of this device and of the peer
//     (default 4791); -stats prints the device's counters at exit;
//     -timeout bounds every wait for the peer (default: none);
//   - -t and -j fail, as the original does on a device without completion
//     timestamps or device memory; -o is accepted and changes nothing;
//   - -c checks every byte between two goroce peers (and the original's
//     page markers against any peer), on both sides, and a bad buffer makes
//     the exit status 1.
//
// As with the original, RoCE needs -g on both sides: -g 1 selects the
// RoCEv2 GID of the device's address (GID index 0 is the link-local one).
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/goroce/goroce/internal/backendflag"
	"github.com/goroce/goroce/internal/devinfo"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

func main() {
	os.Exit(run(filepath.Base(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr))
}

// run is rc_pingpong with its name, arguments and output streams. It
// returns the exit status: 0 on success, 1 on any failure.
func run(prog string, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(prog, args, stderr)
	switch {
	case errors.Is(err, errHelp):
		usage(stdout, prog)
		return 0
	case err != nil:
		usage(stdout, prog) // the original prints its usage on stdout
		return 1
	}
	if err := pingpongMain(&o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// pingpongMain is the original's main after option parsing, step by step.
func pingpongMain(o *options, stdout, stderr io.Writer) error {
	dev, err := openDevice(o)
	if err != nil {
		return err
	}
	defer dev.Close()
	if o.stats {
		// At exit, failed or not: the counters say most about a failure.
		defer devinfo.WriteCounters(stdout, dev)
	}
	p, err := newPingpong(dev, o)
	if p != nil {
		defer p.close()
	}
	if err != nil {
		return err
	}
	c := counts{routs: p.postRecv(o.rxDepth)}
	if c.routs < o.rxDepth {
		return fail(fmt.Sprintf("Couldn't post receive (%d)", c.routs), nil)
	}
	if o.events {
		p.poll.Arm(false)
	}

	my := dest{lid: 0, qpn: p.qp.QPN()} // RoCE has no LIDs: the port's LID is 0
	if o.gidIdx >= 0 {
		if my.gid, err = dev.GID(o.gidIdx); err != nil {
			return fail(fmt.Sprintf("can't read sgid of index %d", o.gidIdx), err)
		}
	}
	my.psn = uint32(qp.RandomPSN())

	// The server listens before it prints its address (the original
	// listens just after), so that whoever starts the client on seeing that
	// line finds the port open.
	var ln net.Listener
	if o.server == "" {
		if ln, err = net.Listen("tcp", ":"+strconv.Itoa(o.port)); err != nil {
			return fail(fmt.Sprintf("Couldn't listen to port %d", o.port), err)
		}
		defer ln.Close()
	}
	fmt.Fprintf(stdout, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", my.lid, my.qpn, my.psn, my.gid)

	var rem dest
	if o.server != "" {
		rem, err = clientExchange(o.server, o.port, my, o.timeout)
	} else {
		rem, err = serverExchange(ln, my, o.timeout, func(rem dest) error { return p.connect(my.psn, rem) })
	}
	if err != nil {
		if o.server != "" && o.gidIdx != 1 {
			// The server's RTR failed for want of a usable GID of ours,
			// most likely; it says so, but we see a closed connection.
			err = fmt.Errorf("%w%s", err, p.gidHint(nil))
		}
		return err
	}
	fmt.Fprintf(stdout, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", rem.lid, rem.qpn, rem.psn, rem.gid)

	if o.server != "" {
		if err := p.connect(my.psn, rem); err != nil {
			return err
		}
	}
	p.pending = recvWRID
	pageSize := os.Getpagesize()
	if o.server != "" {
		if o.chk {
			fillPattern(p.buf, pageSize)
		}
		if err := p.postSend(); err != nil {
			return fail("Couldn't post send", err)
		}
		p.pending |= sendWRID
	}

	start := time.Now()
	if err := p.run(&c); err != nil {
		return err
	}
	report(stdout, o.size, o.iters, time.Since(start))

	if o.chk {
		if bad := checkPattern(p.buf, pageSize); len(bad) > 0 {
			for _, l := range bad {
				fmt.Fprintln(stdout, l)
			}
			return fail("received data failed the -c check", nil)
		}
	}
	return nil
}

// openDevice opens the goroce device on -d's address, or on the source
// address of the route to the server, or as a server on 127.0.0.1.
func openDevice(o *options) (*device.Device, error) {
	spec := backendflag.Spec{Kind: o.backend, Iface: o.iface, Port: o.udpPort}
	if spec.IsAFPacket() && o.udpPort == rocev2.UDPPort {
		spec.Port = 0
	}
	var addr netip.Addr
	switch {
	case o.dev == "" && o.iface != "":
		a, err := backendflag.FirstAddr(o.iface)
		if err != nil {
			return nil, fail(fmt.Sprintf("IB device %s not found", o.iface), err)
		}
		addr = a
	case o.dev != "":
		a, err := o.localAddr()
		if err != nil {
			return nil, fail(fmt.Sprintf("IB device %s not found", o.dev), err)
		}
		addr = a
	case o.server != "":
		a, err := routeSource(o.server, o.port)
		if err != nil {
			return nil, fail("No IB devices found", fmt.Errorf("no local address routes to %s (pass -d ADDR): %w", o.server, err))
		}
		addr = a
	default:
		addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	spec.Addr = addr
	be, _, err := backendflag.Open(spec, addr)
	var dev *device.Device
	if err == nil {
		if dev, err = device.New(device.Config{Backend: be}); err != nil {
			be.Close()
		}
	}
	if err != nil {
		if spec.IsAFPacket() {
			return nil, fail("Couldn't get context for goroce0", err)
		}
		hint := fmt.Sprintf("\nhint: another RoCE device (a kernel rxe or RNIC, or another goroce process on %v) may hold UDP port %d: pass -d with another address (e.g. 127.0.0.2) or -udp-port", addr, o.udpPort)
		return nil, fail("Couldn't get context for goroce0", fmt.Errorf("%w%s", err, hint))
	}
	// Counters for other processes (roce-devinfo -counters -d ADDR), as a
	// kernel device has them in sysfs; without them the run still works.
	if err := dev.Publish(""); err != nil {
		fmt.Fprintln(os.Stderr, "rc_pingpong: warning:", err)
	}
	return dev, nil
}

// routeSource returns the local address the kernel would send from to reach
// host: a UDP "connect" picks it without sending anything.
func routeSource(host string, port int) (netip.Addr, error) {
	c, err := net.Dial("udp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}
