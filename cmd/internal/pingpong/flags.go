package pingpong

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/goroce/goroce/cmd/internal/getopt"
	"github.com/goroce/goroce/rocev2"
)

// options are a ping-pong program's settings, with the original's defaults.
type options struct {
	port     int    // -p: TCP port of the out-of-band exchange
	dev      string // -d: local IP address of the device ("" = route source)
	ibPort   int    // -i
	size     int    // -s
	mtu      rocev2.MTU
	numQP    int // -q (srq_pingpong)
	rxDepth  int // -r
	iters    int // -n
	sl       int // -l: accepted; RoCEv2 carries no SL
	events   bool
	gidIdx   int  // -g: -1 = no GID, as the original's default
	odp      bool // -o, or -O (implicit on-demand paging)
	prefetch bool // -P
	newSend  bool // -N: the ibv_wr_* API, the same work requests
	ts       bool
	dm       bool
	chk      bool
	server   string // the one operand: the server to connect to ("" = be the server)

	// goroce-only options (long options, one or two dashes).
	udpPort uint16        // --udp-port: the device's and the peer's RoCEv2 UDP port
	stats   bool          // --stats: print the device counters at exit
	timeout time.Duration // --timeout: bound on every wait (0: wait forever, like the original)
	backend string        // --backend: udp, afpacket, shm or auto
	iface   string        // --iface, or -i with a name: the network interface
}

func (k *Kind) defaultOptions() options {
	return options{
		port: 18515, ibPort: 1, size: k.defSize, mtu: rocev2.MTU1024, numQP: 16,
		rxDepth: 500, iters: 1000, gidIdx: -1, udpPort: rocev2.UDPPort,
	}
}

// optSpec is one option of getopt_long's table, with its line of the usage
// text.
type optSpec struct {
	short  byte // 0: long only
	long   string
	hasArg bool
	goroce bool // goroce-only: also accepted with a single dash
	help   string
}

// The options of the four originals (rdma-core 44), in their usage order.
var (
	optPort     = optSpec{'p', "port", true, false, "-p, --port=<port>      listen on/connect to port <port> (default 18515)"}
	optDev      = optSpec{'d', "ib-dev", true, false, "-d, --ib-dev=<addr>    bind the goroce device to IP address <addr> (default: the\n                         source address of the route to <host>; 127.0.0.1 as server)"}
	optIBPort   = optSpec{'i', "ib-port", true, false, "-i, --ib-port=<port>   use port <port> of IB device (default 1)"}
	optMTU      = optSpec{'m', "mtu", true, false, "-m, --mtu=<size>       path MTU (default 1024)"}
	optNumQP    = optSpec{'q', "num-qp", true, false, "-q, --num-qp=<num>     number of QPs to use (default 16)"}
	optRxDepth  = optSpec{'r', "rx-depth", true, false, "-r, --rx-depth=<dep>   number of receives to post at a time (default 500)"}
	optIters    = optSpec{'n', "iters", true, false, "-n, --iters=<iters>    number of exchanges (default 1000)"}
	optSL       = optSpec{'l', "sl", true, false, "-l, --sl=<sl>          service level value (accepted, unused on RoCEv2)"}
	optEvents   = optSpec{'e', "events", false, false, "-e, --events           sleep on CQ events (default poll)"}
	optGID      = optSpec{'g', "gid-idx", true, false, "-g, --gid-idx=<gid index> local port gid index (RoCE needs one: use -g 1)"}
	optODP      = optSpec{'o', "odp", false, false, "-o, --odp              use on demand paging (goroce memory needs no pinning: no-op)"}
	optIODP     = optSpec{'O', "iodp", false, false, "-O, --iodp             use implicit on demand paging (no-op, as -o)"}
	optPrefetch = optSpec{'P', "prefetch", false, false, "-P, --prefetch         prefetch an ODP MR (no-op; needs -o or -O, as the original)"}
	optTS       = optSpec{'t', "ts", false, false, "-t, --ts               get CQE with timestamp (not supported by goroce)"}
	optChk      = optSpec{'c', "chk", false, false, "-c, --chk              validate received buffer"}
	optDM       = optSpec{'j', "dm", false, false, "-j, --dm               use device memory (not supported by goroce)"}
	optNewSend  = optSpec{'N', "new_send", false, false, "-N, --new_send         use new post send WR API (the same work requests: no-op)"}
	optHelp     = optSpec{'h', "help", false, false, ""}

	// goroce's own options.
	goroceOpts = []optSpec{
		{0, "udp-port", true, true, "-udp-port=<port>       UDP port of this device and of the peer's (default 4791; no 0:\n                         the exchange carries no port, so both sides name the same)"},
		{0, "stats", false, true, "-stats                 print the device's counters at exit"},
		{0, "timeout", true, true, "-timeout=<duration>    give up after waiting this long for the peer, e.g. 30s\n                         (default 0: wait forever, like the original)"},
		{0, "backend", true, true, "-backend=udp|afpacket|shm|auto  packet backend: udp (default, a UDP socket), afpacket (whole\n                         Ethernet frames on -i's interface, as rxe; needs CAP_NET_RAW), shm (shared memory to\n                         goroce processes of this host) or auto (shared memory where the peer offers it, else UDP)"},
		{0, "iface", true, true, "-i <iface>, -iface=<iface>  the network interface (a name; a number is the IB port);\n                         the address defaults to its first one"},
	}
)

func sizeOpt(def int) optSpec {
	return optSpec{'s', "size", true, false, fmt.Sprintf("-s, --size=<size>      size of message to exchange (default %d)", def)}
}

// errUsage means: print the usage and exit 1, as the original does for any
// bad option. errHelp means: print the usage and exit 0.
var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help")
)

// parseFlags parses args as getopt_long does for the original (see
// cmd/internal/getopt).
func (k *Kind) parseFlags(prog string, args []string, stderr io.Writer) (options, error) {
	o := k.defaultOptions()
	gp := getopt.Parser{Prog: prog, ListAmbiguous: true}
	for _, s := range k.opts {
		gp.Opts = append(gp.Opts, getopt.Opt{Short: s.short, Long: s.long, HasArg: s.hasArg, Goroce: s.goroce})
	}
	operands, err := gp.Parse(args, func(i int, val string) error { return o.set(prog, k.opts[i], val, stderr) }, stderr)
	switch {
	case errors.Is(err, getopt.ErrBadOption) || errors.Is(err, getopt.ErrUsage):
		return o, errUsage // the original: any bad option is a usage error
	case err != nil:
		return o, err
	}
	switch len(operands) {
	case 0:
	case 1:
		o.server = operands[0]
	default:
		return o, errUsage // the original: more than one operand is a usage error
	}
	return o, nil
}

// set applies one option. Numbers are read like strtol with base 0
// (decimal, 0x hex, 0 octal); unlike strtol, garbage is an error rather
// than 0, since a silent 0 (say, -s x) only fails later and obscurely.
func (o *options) set(prog string, s optSpec, val string, stderr io.Writer) error {
	num := func(lo, hi int64) (int, error) {
		n, err := strconv.ParseInt(val, 0, 64)
		if err != nil || n < lo || n > hi {
			fmt.Fprintf(stderr, "%s: invalid value '%s' for --%s (want a number from %d to %d)\n", prog, val, s.long, lo, hi)
			return 0, errUsage
		}
		return int(n), nil
	}
	var err error
	switch s.long {
	case "port":
		o.port, err = num(0, 65535)
	case "ib-dev":
		o.dev = val
	case "ib-port":
		if _, perr := strconv.ParseInt(val, 0, 64); perr != nil && val != "" && (val[0] < '0' || val[0] > '9') && val[0] != '-' {
			o.iface = val // goroce: -i also takes the network interface
			break
		}
		o.ibPort, err = num(1, 255)
	case "size":
		o.size, err = num(0, 1<<31-1)
	case "mtu":
		var n int
		if n, err = num(0, 1<<20); err == nil {
			o.mtu = rocev2.MTUFromBytes(n)
			if o.mtu.Bytes() != n { // pp_mtu_to_enum: only the five IB MTUs
				fmt.Fprintf(stderr, "%s: invalid MTU %d (use 256, 512, 1024, 2048 or 4096)\n", prog, n)
				err = errUsage
			}
		}
	case "num-qp":
		o.numQP, err = num(0, 1<<31-1)
	case "rx-depth":
		o.rxDepth, err = num(0, 1<<31-1)
	case "iters":
		o.iters, err = num(0, 1<<31-1)
	case "sl":
		o.sl, err = num(-1<<31, 1<<31-1)
	case "events":
		o.events = true
	case "gid-idx":
		o.gidIdx, err = num(-1<<31, 1<<31-1)
	case "odp":
		o.odp = true
	case "iodp":
		o.odp = true
	case "prefetch":
		o.prefetch = true
	case "new_send":
		o.newSend = true
	case "ts":
		o.ts = true
	case "chk":
		o.chk = true
	case "dm":
		o.dm = true
	case "help":
		err = errHelp
	case "udp-port":
		var n int
		n, err = num(1, 65535) // 0 (a free port) could not be told to the peer
		o.udpPort = uint16(n)
	case "stats":
		o.stats = true
	case "backend":
		if val != "udp" && val != "afpacket" && val != "shm" && val != "auto" {
			fmt.Fprintf(stderr, "%s: invalid value '%s' for --backend (use udp, afpacket, shm or auto)\n", prog, val)
			err = errUsage
		}
		o.backend = val
	case "iface":
		o.iface = val
	case "timeout":
		if o.timeout, err = time.ParseDuration(val); err != nil || o.timeout < 0 {
			fmt.Fprintf(stderr, "%s: invalid duration '%s' for --timeout (e.g. 30s; 0 waits forever)\n", prog, val)
			err = errUsage
		}
	}
	return err
}

// localAddr parses -d, which in goroce names the device by its IP address
// (a goroce device is a UDP socket on that address, not a kernel device);
// goroce0, the name the tools print, means the default address.
func (o *options) localAddr() (netip.Addr, error) {
	a, err := netip.ParseAddr(o.dev)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("goroce's -d takes the IP address to bind the device to (e.g. -d 127.0.0.1), or goroce0 for the default one, not %q", o.dev)
	}
	return a.Unmap(), nil
}

// usage prints the original's usage text, with goroce's meaning of -d and
// goroce's own options added.
func (k *Kind) usage(w io.Writer, prog string) {
	fmt.Fprintf(w, "Usage:\n")
	fmt.Fprintf(w, "  %s            start a server and wait for connection\n", prog)
	fmt.Fprintf(w, "  %s <host>     connect to server at <host>\n", prog)
	fmt.Fprintf(w, "\n")
	fmt.Fprintf(w, "Options:\n")
	for _, s := range k.opts {
		if !s.goroce && s.help != "" {
			fmt.Fprintf(w, "  %s\n", s.help)
		}
	}
	fmt.Fprintf(w, "\n")
	fmt.Fprintf(w, "goroce options (one or two dashes):\n")
	for _, s := range k.opts {
		if s.goroce {
			fmt.Fprintf(w, "  %s\n", s.help)
		}
	}
}
