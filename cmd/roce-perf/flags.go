package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/goroce/goroce/internal/backendflag"
	"github.com/goroce/goroce/rocev2/device"
)

// Defaults, following perftest where it has one.
const (
	defaultOOBPort  = 18515 // perftest's and rc_pingpong's TCP port
	defaultBWSize   = 65536 // DEF_SIZE_BW
	defaultLatSize  = 64
	defaultDuration = 3 * time.Second
	defaultTxDepth  = 128 // DEF_TX_BW
	defaultCQMod    = 64
	defaultRxDepth  = 512 // DEF_RX_SEND
	defaultTimeout  = 30 * time.Second

	// maxDurationIters bounds a -D run by count as well as by time.
	maxDurationIters = 1 << 32
	// maxLatSamples bounds the latency samples a -D run keeps.
	maxLatSamples = 4 << 20
)

// Test kinds, as the client names them to the server.
const (
	kindWrite = "write"
	kindSend  = "send"
	kindRead  = "read"
	kindLat   = "send_lat"
	kindUD    = "ud"
	kindDemo  = "demo"
)

// config is the parsed command line.
type config struct {
	local    netip.Addr
	backend  backendflag.Spec // -backend, -i
	server   string           // the server's address; empty in server mode
	oobPort  int
	rocePort int
	tests    []string
	size     int // 0: the test's default
	iters    int
	duration time.Duration
	mtu      int // 0: the largest both ports have active
	txDepth  int
	cqMod    int
	rxDepth  int
	spin     int
	events   bool
	raw      bool
	jsonOut  bool
	capture  string
	ready    string
	timeout  time.Duration
	cpuprof  string

	// onListen, if set, is told the server's control address once it
	// listens (tests use it; -ready writes it to a file).
	onListen func(net.Addr)
}

func (c *config) isServer() bool { return c.server == "" }

// parseFlags parses the command line. Usage errors say what to type
// instead; -h returns flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("roce-perf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage:
  server: roce-perf -d LOCAL_ADDR [-backend udp|afpacket|shm|auto] [-i IFACE] [-p PORT] [-capture FILE] [-json]
  client: roce-perf -d LOCAL_ADDR [-backend udp|afpacket|shm|auto] [-i IFACE] [-t write|send|read|ud | -lat | -all | -demo] [-s SIZE] [-n ITERS | -D SECONDS] SERVER_ADDR

Measures goroce RC between two processes like perftest (ib_write_bw, ib_send_bw,
ib_read_bw, ib_send_lat), UD SENDs of one packet each, and a raw-UDP baseline
between the same addresses.
The client chooses the tests; the server follows and exits when the client is done.

`)
		fs.PrintDefaults()
	}
	local := fs.String("d", "", "local `address` the RoCE device binds (one per process, e.g. 127.0.0.1 and 127.0.0.2; default with -i: the interface's first)")
	fs.StringVar(&c.backend.Kind, "backend", backendflag.UDP, backendflag.FlagHelp)
	fs.StringVar(&c.backend.Rx, "rx", "", "receive `mode` of -backend afpacket: mmsg (recvmmsg, the default) or ring (a TPACKET_V3 ring)")
	fs.StringVar(&c.backend.Iface, "i", "", "network `interface` of the device (-backend afpacket); the address defaults to its first one")
	fs.IntVar(&c.oobPort, "p", defaultOOBPort, "TCP `port` of the control connection (server: 0 picks a free one, see -ready)")
	fs.IntVar(&c.rocePort, "port", 4791, "UDP `port` of the RoCE device (0: any free port; captures decode as RoCE only on 4791)")
	test := fs.String("t", kindWrite, "bandwidth `test`: write, send or read (RC), or ud (UD SENDs of one packet, flow-controlled like the raw baseline)")
	lat := fs.Bool("lat", false, "run the SEND latency ping-pong instead of a bandwidth test")
	all := fs.Bool("all", false, "run write, send and read bandwidth, SEND latency, then UD")
	demo := fs.Bool("demo", false, "run every RC operation a few times with data verification")
	fs.IntVar(&c.size, "s", 0, "message `size` in bytes (default 65536 for bandwidth, 64 for latency, the path MTU for ud)")
	fs.IntVar(&c.iters, "n", 0, "`iterations` per test (default: run for -D seconds)")
	dur := fs.Float64("D", 0, "`seconds` per test (default 3 unless -n is given)")
	fs.IntVar(&c.mtu, "m", 0, "path `MTU` in bytes: 256, 512, 1024, 2048 or 4096 (default: the largest active on both ports)")
	fs.IntVar(&c.txDepth, "q", defaultTxDepth, "TX `depth`: send work requests outstanding")
	fs.IntVar(&c.cqMod, "Q", defaultCQMod, "signal every `N`th send work request (CQ moderation)")
	fs.IntVar(&c.rxDepth, "r", defaultRxDepth, "receive work requests the SEND test keeps posted")
	fs.IntVar(&c.spin, "spin", -1, "CQ `polls` before sleeping on a completion event (-1: busy-poll for latency, and for bandwidth with more than 2 CPUs; 0 with -e)")
	fs.BoolVar(&c.events, "e", false, "sleep on completion events instead of busy-polling (perftest -e); the raw baseline then blocks too")
	fs.BoolVar(&c.raw, "raw", true, "also measure the raw UDP baseline")
	fs.BoolVar(&c.jsonOut, "json", false, "print the results as one JSON object instead of tables")
	fs.StringVar(&c.capture, "capture", "", "write every packet the device sends and receives to this pcapng `file`")
	fs.StringVar(&c.ready, "ready", "", "server: write the control address to this `file` once listening")
	fs.StringVar(&c.cpuprof, "cpuprofile", "", "write a CPU profile of this process to `file` (go tool pprof)")
	fs.DurationVar(&c.timeout, "timeout", defaultTimeout, "limit for connecting and for each control message, on top of the test's own duration")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}

	if *local != "" {
		a, err := netip.ParseAddr(*local)
		if err != nil {
			return nil, fmt.Errorf("-d %q: %v (give an IP address such as 127.0.0.1)", *local, err)
		}
		c.backend.Addr = a
	}
	if err := c.backend.Check(); err != nil {
		return nil, err
	}
	a, ok, err := c.backend.LocalAddr()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("-d LOCAL_ADDR is required (or -i IFACE): the address this process's RoCE device binds (e.g. -d 127.0.0.1 on the server, -d 127.0.0.2 on the client)")
	}
	c.local = a
	switch fs.NArg() {
	case 0:
	case 1:
		c.server = fs.Arg(0)
	default:
		return nil, fmt.Errorf("too many arguments %q: give only the server address, after the flags", fs.Args())
	}

	chosen := 0
	for _, b := range []bool{*lat, *all, *demo} {
		if b {
			chosen++
		}
	}
	tSet := false
	fs.Visit(func(f *flag.Flag) { tSet = tSet || f.Name == "t" })
	if tSet {
		chosen++
	}
	if chosen > 1 {
		return nil, errors.New("-t, -lat, -all and -demo each choose the tests: give one of them")
	}
	switch {
	case *all:
		c.tests = []string{kindWrite, kindSend, kindRead, kindLat, kindUD}
	case *lat:
		c.tests = []string{kindLat}
	case *demo:
		c.tests = []string{kindDemo}
	default:
		switch *test {
		case kindWrite, kindSend, kindRead, kindUD:
			c.tests = []string{*test}
		default:
			return nil, fmt.Errorf("-t %q: the bandwidth tests are write, send, read and ud (use -lat for latency)", *test)
		}
	}

	if c.iters < 0 || *dur < 0 {
		return nil, errors.New("-n and -D must be positive")
	}
	if c.iters > 0 && *dur > 0 {
		return nil, errors.New("-n and -D both bound the test: give one of them")
	}
	c.duration = time.Duration(*dur * float64(time.Second))
	if c.iters == 0 && c.duration == 0 {
		c.duration = defaultDuration
	}
	if c.size < 0 || c.size > device.MaxMsgSize {
		return nil, fmt.Errorf("-s %d: the size must be 0..%d bytes", c.size, device.MaxMsgSize)
	}
	if c.mtu != 0 {
		switch c.mtu {
		case 256, 512, 1024, 2048, 4096:
		default:
			return nil, fmt.Errorf("-m %d: an IB MTU is 256, 512, 1024, 2048 or 4096", c.mtu)
		}
	}
	if c.txDepth < 1 || c.txDepth > device.MaxQPWR {
		return nil, fmt.Errorf("-q %d: the TX depth must be 1..%d", c.txDepth, device.MaxQPWR)
	}
	if c.rxDepth < 1 || c.rxDepth > device.MaxQPWR {
		return nil, fmt.Errorf("-r %d: the RX depth must be 1..%d", c.rxDepth, device.MaxQPWR)
	}
	if c.cqMod < 1 {
		return nil, fmt.Errorf("-Q %d: signal at least every work request (1)", c.cqMod)
	}
	c.cqMod = min(c.cqMod, c.txDepth) // else the queue fills with unsignaled requests
	if c.oobPort < 0 || c.oobPort > 65535 || c.rocePort < 0 || c.rocePort > 65535 {
		return nil, errors.New("-p and -port must be 0..65535")
	}
	if c.oobPort == 0 && !c.isServer() {
		return nil, errors.New("-p 0: the client must be told the server's port (the server prints it, or writes it to its -ready file)")
	}
	if c.backend.IsAFPacket() && c.rocePort != 4791 {
		return nil, errors.New("-backend afpacket runs on UDP port 4791 only (no -port)")
	}
	if c.timeout <= 0 {
		return nil, errors.New("-timeout must be positive")
	}
	return c, nil
}
