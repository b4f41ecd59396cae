// Package cmtool is what goroce's librdmacm example programs (rping,
// ucmatose, udaddy) share: their goroce-only options, and the device and
// connection manager they open.
//
//	--backend=udp|afpacket  the packet backend (see internal/backendflag)
//	--iface=IFACE           the interface (afpacket; the address defaults to its first one)
//	--udp-port=PORT         the device's UDP port (default 4791)
//	--roce-port=PORT        the peer's device's UDP port (default: --udp-port's; a server answers
//	                        the port a peer's MADs come from unless it is given)
//	--timeout=DURATION      give up a connection attempt or a wait after this long
//	--stats                 print the CM's and the device's counters at exit
//	--capture=FILE          record what the device sends and receives (pcapng)
//
// Each may be spelt with one dash too (-udp-port 4791).
package cmtool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/goroce/goroce/cmd/internal/getopt"
	"github.com/goroce/goroce/internal/backendflag"
	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/rdmacm"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// Options are the goroce-only options.
type Options struct {
	Backend  string
	Iface    string
	UDPPort  uint16
	RoCEPort uint16
	Timeout  time.Duration
	Stats    bool
	Capture  string
}

// Opts are their getopt definitions, to append to a program's.
var Opts = []getopt.Opt{
	{Long: "backend", HasArg: true, Goroce: true},
	{Long: "iface", HasArg: true, Goroce: true},
	{Long: "udp-port", HasArg: true, Goroce: true},
	{Long: "roce-port", HasArg: true, Goroce: true},
	{Long: "timeout", HasArg: true, Goroce: true},
	{Long: "stats", Goroce: true},
	{Long: "capture", HasArg: true, Goroce: true},
}

// Usage describes them, for a program's usage text.
const Usage = `goroce options:
	--backend=udp|afpacket	packet backend: udp (default, a UDP socket) or afpacket (whole
				Ethernet frames on --iface's interface, as rxe; needs CAP_NET_RAW)
	--iface=IFACE		network interface (the address defaults to its first one)
	--udp-port=PORT		UDP port of this device (default 4791)
	--roce-port=PORT	UDP port of the peer's device (default: --udp-port's)
	--timeout=DURATION	give up waiting for the peer after this long (default: never)
	--stats			print the CM's and the device's counters at exit
	--capture=FILE		record what the device sends and receives into FILE (pcapng)
`

// Set applies Opts[i] with its argument.
func (o *Options) Set(i int, val string) error {
	switch Opts[i].Long {
	case "backend":
		o.Backend = val
	case "iface":
		o.Iface = val
	case "udp-port", "roce-port":
		p, err := strconv.ParseUint(val, 10, 16)
		if err != nil || p == 0 {
			return fmt.Errorf("--%s %q: a UDP port 1..65535", Opts[i].Long, val)
		}
		if Opts[i].Long == "udp-port" {
			o.UDPPort = uint16(p)
		} else {
			o.RoCEPort = uint16(p)
		}
	case "timeout":
		d, err := time.ParseDuration(val)
		if err != nil || d < 0 {
			return fmt.Errorf("--timeout %q: a duration such as 30s", val)
		}
		o.Timeout = d
	case "stats":
		o.Stats = true
	case "capture":
		o.Capture = val
	}
	return nil
}

// PeerPort returns the peer's device's UDP port.
func (o *Options) PeerPort() uint16 {
	switch {
	case o.RoCEPort != 0:
		return o.RoCEPort
	case o.UDPPort != 0 && o.Backend != backendflag.AFPacket:
		return o.UDPPort
	}
	return rocev2.UDPPort
}

// RouteSource returns the local address the route to host uses.
func RouteSource(host netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(host, 9)))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("no route to %v: %w", host, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// Stack is an open device with its CM.
type Stack struct {
	Dev  *device.Device
	CM   *rdmacm.CM
	capF *os.File
	capW *pcap.Writer
}

// Open opens the device on addr (or, with none, on --iface's first
// address) with the chosen backend, and a CM on it.
func (o *Options) Open(addr netip.Addr) (*Stack, error) {
	spec := backendflag.Spec{Kind: o.Backend, Iface: o.Iface, Port: o.UDPPort}
	if !addr.IsValid() || addr.IsUnspecified() {
		a, ok, err := spec.LocalAddr()
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return nil, errors.New("goroce's device needs its address: give -a ADDR (a server) or -I ADDR, or --iface IFACE")
		}
		addr = a
	}
	spec.Addr = addr
	be, _, err := backendflag.Open(spec, addr)
	if err != nil {
		return nil, fmt.Errorf("%w\nhint: another RoCE device (a kernel rxe, an RNIC, another goroce process) may hold UDP port %d on %v: use another address or --udp-port", err, max(o.UDPPort, rocev2.UDPPort), addr)
	}
	st := &Stack{}
	if o.Capture != "" {
		if st.capF, err = os.Create(o.Capture); err != nil {
			be.Close()
			return nil, fmt.Errorf("--capture: %w", err)
		}
		if st.capW, err = pcap.NewWriter(st.capF, pcap.WriterOptions{InterfaceName: "goroce0",
			Description: "goroce RoCEv2 device with its RDMA CM"}); err != nil {
			be.Close()
			st.capF.Close()
			return nil, fmt.Errorf("--capture: %w", err)
		}
		be = pcap.NewTap(be, st.capW).Backend()
	}
	dev, err := device.New(device.Config{Backend: be})
	if err != nil {
		be.Close()
		st.closeCapture()
		return nil, err
	}
	cfg := rdmacm.Config{}
	if peer := o.RoCEPort; peer != 0 {
		// Every peer's device receives on that port (a test on one host).
		cfg.PeerRoCEPort = func(netip.AddrPort) uint16 { return peer }
	}
	cm, err := rdmacm.New(dev, cfg)
	if err != nil {
		dev.Close()
		st.closeCapture()
		return nil, err
	}
	st.Dev, st.CM = dev, cm
	return st, nil
}

func (s *Stack) closeCapture() {
	if s.capW != nil {
		s.capW.Close()
		s.capF.Close()
	}
}

// Close closes the CM and the device, printing the counters first if asked.
func (s *Stack) Close(o *Options, w io.Writer) {
	if o.Stats {
		for _, c := range s.CM.Counters.Snapshot() {
			if c.Value != 0 {
				fmt.Fprintf(w, "cm %s %d\n", c.Name, c.Value)
			}
		}
		for _, c := range s.Dev.Counters.Snapshot() {
			if c.Value != 0 {
				fmt.Fprintf(w, "device %s %d\n", c.Name, c.Value)
			}
		}
	}
	s.CM.Close()
	s.Dev.Close() // the device closes the tap first: then the capture
	s.closeCapture()
}

// EventName is librdmacm's rdma_event_str of what an error from rdmacm
// means, and the status rdma_cm reports with it, as the programs print
// them ("cma event RDMA_CM_EVENT_REJECTED, error 8").
func EventName(err error) (string, int) {
	var rej *rdmacm.RejectedError
	switch {
	case errors.As(err, &rej) && rej.Reason != 0:
		return "RDMA_CM_EVENT_REJECTED", int(rej.Reason)
	case errors.As(err, &rej):
		return "RDMA_CM_EVENT_UNREACHABLE", int(rej.SIDRStatus)
	case errors.Is(err, rdmacm.ErrUnreachable), errors.Is(err, rdmacm.ErrTimeout):
		return "RDMA_CM_EVENT_UNREACHABLE", -110 // -ETIMEDOUT
	}
	return "RDMA_CM_EVENT_CONNECT_ERROR", -22
}

// Example is the frame librdmacm's cmatose and udaddy share: the device on
// bind (or, for a client, on the source of the route to server), the
// body, "test complete", cleanup (the connections or endpoints), the
// device closed (with --stats its counters), and "return status N". It
// returns the exit status: the status's low byte, as the original's
// return from main. orig is the original's name in its messages
// ("cmatose"), name the program's in goroce's own.
func Example(ctx context.Context, orig, name string, o *Options, bind, server netip.Addr, stdout, stderr io.Writer,
	body func(context.Context, *Stack) int, cleanup func()) int {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	devAddr := bind
	if !devAddr.IsValid() && server.IsValid() {
		a, err := RouteSource(server)
		if err != nil {
			fmt.Fprintf(stderr, "%s: failure getting addr: %v\n", orig, err)
			return 1
		}
		devAddr = a
	}
	st, err := o.Open(devAddr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	ret := body(ctx, st)
	fmt.Fprintln(stdout, "test complete")
	cleanup()
	st.Close(o, stderr)
	fmt.Fprintf(stdout, "return status %d\n", ret)
	return ret & 0xff
}

// Main runs a tool's run with the process's arguments and streams, its
// context ended by SIGINT or SIGTERM, and exits with its status.
func Main(run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// PrintEvent prints a failed connection or resolution as cmatose's and
// udaddy's CM handlers do ("PROG: event: NAME, error: N") and returns the
// status.
func PrintEvent(w io.Writer, prog string, err error) int {
	name, status := EventName(err)
	fmt.Fprintf(w, "%s: event: %s, error: %d\n", prog, name, status)
	return status
}
