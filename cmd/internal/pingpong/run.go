package pingpong

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/goroce/goroce/cmd/internal/control"
	"github.com/goroce/goroce/internal/backendflag"
	"github.com/goroce/goroce/internal/devinfo"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// Main is the program of kind k with its name, arguments and output
// streams. It returns the exit status: 0 on success, 1 on any failure.
func Main(k *Kind, prog string, args []string, stdout, stderr io.Writer) int {
	o, err := k.parseFlags(prog, args, stderr)
	switch {
	case errors.Is(err, errHelp):
		k.usage(stdout, prog)
		return 0
	case err != nil:
		k.usage(stdout, prog) // the original prints its usage on stdout
		return 1
	}
	if err := k.main(&o, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// main is the original's main after option parsing, step by step.
func (k *Kind) main(o *options, stdout io.Writer) error {
	// The original's checks of its memory options, before any device.
	if o.odp && o.dm {
		return fail("DM memory region can't be on demand", nil)
	}
	if !o.odp && o.prefetch {
		return fail("prefetch is valid only with on-demand memory region", nil)
	}
	dev, err := openDevice(k, o)
	if err != nil {
		return err
	}
	defer dev.Close()
	if o.stats {
		// At exit, failed or not: the counters say most about a failure.
		defer devinfo.WriteCounters(stdout, dev)
	}
	p, err := newPingpong(k, dev, o)
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

	// RoCE has no LIDs: the port's LID is 0. srq_pingpong always
	// exchanges maxQP addresses, the ones past its QPs zero.
	n := 1
	if k.srq {
		n = maxQP
	}
	my := make([]dest, n)
	for i, q := range p.qps {
		my[i].qpn = q.QPN()
		if o.gidIdx >= 0 {
			if my[i].gid, err = dev.GID(o.gidIdx); err != nil {
				return fail(fmt.Sprintf("can't read sgid of index %d", o.gidIdx), err)
			}
		}
		my[i].psn = uint32(qp.RandomPSN())
	}

	// The server listens before it prints its address (the original
	// listens just after), so that whoever starts the client on seeing that
	// line finds the port open.
	var ln net.Listener
	if o.server == "" {
		// On the device's address, not every address: a server on
		// another address of the host has a port 18515 of its own.
		if ln, err = control.Listen(dev.LocalAddr().Addr(), o.port); err != nil {
			return fail(fmt.Sprintf("Couldn't listen to port %d", o.port), err)
		}
		defer ln.Close()
	}
	sep := ","
	if k.typ == qp.UD {
		sep = ":" // ud_pingpong's local line has a colon before the GID
	}
	for _, d := range my[:len(p.qps)] {
		fmt.Fprintf(stdout, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n", d.lid, d.qpn, d.psn, sep, d.gid)
	}

	if o.server != "" {
		p.rem, err = clientExchange(o.server, o.port, my, o.timeout)
	} else {
		p.rem, err = serverExchange(ln, my, o.timeout, func(rem []dest) error { return p.connect(my, rem) })
	}
	if err != nil {
		if o.server != "" && o.gidIdx != 1 {
			// The server's RTR failed for want of a usable GID of ours,
			// most likely; it says so, but we see a closed connection.
			err = fmt.Errorf("%w%s", err, p.gidHint(nil))
		}
		return err
	}
	for _, d := range p.rem[:len(p.qps)] {
		fmt.Fprintf(stdout, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", d.lid, d.qpn, d.psn, d.gid)
	}

	if o.server != "" {
		if err := p.connect(my, p.rem); err != nil {
			return err
		}
	}
	pageSize := os.Getpagesize()
	for i := range p.qps {
		p.pending[i] = recvWRID
		if o.server == "" {
			continue
		}
		if i == 0 && o.chk {
			fillPattern(p.buf[p.sendOff():p.sendOff()+o.size], pageSize)
		}
		if err := p.postSend(i); err != nil {
			return fail("Couldn't post send", err)
		}
		p.pending[i] |= sendWRID
	}

	start := time.Now()
	if err := p.run(&c); err != nil {
		return err
	}
	report(stdout, o.size, o.iters, time.Since(start))

	if o.chk {
		// srq_pingpong's peers may still be sending (each side stops
		// after iters completions of all its QPs together): no receive
		// may write the buffer while it is checked.
		p.close()
		fill := byte(0x7b)
		if k.srq {
			fill = 0
		}
		bad := append(p.grhErrs, checkPattern(p.received(), pageSize, fill)...)
		if len(bad) > 0 {
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
func openDevice(k *Kind, o *options) (*device.Device, error) {
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
	case o.dev != "" && o.dev != control.DeviceName:
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
		return nil, fail("Couldn't get context for goroce0", fmt.Errorf("%w%s", err, control.OpenHint(err, addr, o.udpPort)))
	}
	// Counters for other processes (roce-devinfo -counters -d ADDR), as a
	// kernel device has them in sysfs; without them the run still works.
	if err := dev.Publish(""); err != nil {
		fmt.Fprintln(os.Stderr, k.name+": warning:", err)
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
