package perftest

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

// ConnType is perftest's connection type.
type ConnType uint8

const (
	RC ConnType = 0
	UC ConnType = 1
	UD ConnType = 2
)

var connNames = [...]string{"RC", "UC", "UD"}

// AtomicType is perftest's atomic operation.
type AtomicType uint8

const (
	CmpAndSwap  AtomicType = 0
	FetchAndAdd AtomicType = 1
)

var atomicNames = [...]string{"CMP_AND_SWAP", "FETCH_AND_ADD"}

// params are a run's settings (perftest_parameters), with perftest's
// defaults and the dependencies it forces between them.
type params struct {
	t          *Test
	port       int
	dev        string // -d: the device's IP address ("" = route source)
	ibPort     int
	server     string // the operand: the server ("" = be the server)
	size       int
	reqSize    bool // -s given
	iters      int
	txDepth    int
	rxDepth    int
	cqMod      int
	reqCQMod   bool
	numQPs     int
	mtu        int // -m in bytes, 0 = the port's
	conn       ConnType
	gidIndex   int  // -x; perftest picks the RoCEv2 IPv4 GID when not given
	gidUser    bool // -x given
	inline     int  // -I, -1: default
	outReads   int  // -o, 0: the device's maximum
	qpTimeout  int
	sl         int
	atomic     AtomicType
	all        bool          // -a
	duration   time.Duration // -D, 0: iterations
	margin     time.Duration // -f, -1: a quarter of the duration
	noPeak     bool
	events     bool
	gbits      bool // --report_gbits
	histogram  bool // -H
	unsorted   bool // -U
	noXchgVers bool // --dont_xchg_versions
	warmUp     bool // --perform_warm_up
	workCM     bool // -R: the test's QPs connected through the RDMA CM (work_rdma_cm)
	useCM      bool // -z, and -R: the exchanges over an RDMA CM connection (use_rdma_cm)

	// The exchange's results.
	curMTU        int // the IB MTU enum
	cycleBuffer   int
	cacheLineSize int

	// goroce's own.
	udpPort uint16
	stats   bool
	timeout time.Duration
}

// optSpec is one option of the table getopt_long reads.
type optSpec struct {
	short  byte
	long   string
	hasArg bool
	goroce bool
	only   func(*Test) bool // nil: every test
	help   string
}

func bwOnly(t *Test) bool      { return t.kind == BW }
func latOnly(t *Test) bool     { return t.kind == Lat }
func sendOnly(t *Test) bool    { return t.verb == Send }
func notAtomic(t *Test) bool   { return t.verb != Atomic }
func readAtomic(t *Test) bool  { return t.verb == Read || t.verb == Atomic }
func atomicOnly(t *Test) bool  { return t.verb == Atomic }
func notReadAtom(t *Test) bool { return t.verb != Read && t.verb != Atomic }

// opts is perftest's option table (the part goroce takes, and the rest,
// refused by name), in its usage order.
var opts = []optSpec{
	{'a', "all", false, false, notAtomic, "Run sizes from 2 till 2^23"},
	{'A', "atomic_type", true, false, atomicOnly, "type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD} (default FETCH_AND_ADD)"},
	{'b', "bidirectional", false, false, bwOnly, "Measure bidirectional bandwidth (not supported by goroce)"},
	{'c', "connection", true, false, nil, ""},
	{'C', "report-cycles", false, false, latOnly, "report times in cpu cycle units (not supported by goroce)"},
	{'d', "ib-dev", true, false, nil, "bind the goroce device to IP address <addr> (default: the source address of the route to <host>; 127.0.0.1 as server)"},
	{'D', "duration", true, false, nil, "Run test for a customized period of seconds."},
	{'e', "events", false, false, nil, "Sleep on CQ events (default poll)"},
	{'f', "margin", true, false, nil, "measure results within margins. (default=2sec)"},
	{'F', "CPU-freq", false, false, nil, "Do not show a warning even if cpufreq_ondemand module is loaded, and cpu-freq is not on max."},
	{'h', "help", false, false, nil, "Show this help screen."},
	{'H', "report-histogram", false, false, latOnly, "Print out all results (default print summary only)"},
	{'i', "ib-port", true, false, nil, "Use port <port> of IB device (default 1)"},
	{'I', "inline_size", true, false, notReadAtom, "Max size of message to be sent in inline"},
	{'l', "post_list", true, false, bwOnly, "Post list of WQEs of <list size> size (not supported by goroce)"},
	{'m', "mtu", true, false, nil, "MTU size : 256 - 4096 (default port mtu)"},
	{'n', "iters", true, false, nil, ""},
	{'N', "noPeak", false, false, bwOnly, "Cancel peak-bw calculation (default with peak up to iters=20000)"},
	{'o', "outs", true, false, readAtomic, "num of outstanding read/atom(default max of device)"},
	{'O', "dualport", false, false, bwOnly, "Run test in dual-port mode (not supported by goroce)"},
	{'p', "port", true, false, nil, "Listen on/connect to port <port> (default 18515)"},
	{'q', "qp", true, false, bwOnly, "Num of qp's(default 1)"},
	{'Q', "cq-mod", true, false, bwOnly, "Generate Cqe only after <--cq-mod> completion"},
	{'r', "rx-depth", true, false, sendOnly, "Rx queue size (default 512)."},
	{'R', "rdma_cm", false, false, nil, "Connect QPs with rdma_cm and run test on those QPs"},
	{'s', "size", true, false, notAtomic, ""},
	{'S', "sl", true, false, nil, "SL (default 0; unused on RoCEv2)"},
	{'t', "tx-depth", true, false, bwOnly, "Size of tx queue (default 128)"},
	{'u', "qp-timeout", true, false, nil, "QP timeout, timeout value is 4 usec * 2 ^(timeout), default 14"},
	{'U', "report-unsorted", false, false, latOnly, "(implies -H) print out unsorted results (default sorted)"},
	{'V', "version", false, false, nil, "Display version number"},
	{'x', "gid-index", true, false, nil, "Test uses GID with GID index (Default : IB - no gid . ETH - 0)"},
	{'z', "com_rdma_cm", false, false, nil, "Communicate with rdma_cm module to exchange data - use regular QPs"},
	{0, "dont_xchg_versions", false, false, nil, "Do not exchange versions and MTU with other side"},
	{0, "perform_warm_up", false, false, func(t *Test) bool { return t.kind == BW && t.verb != Send }, "Perform some iterations before start measuring in order to warming-up memory cache, valid in Atomic, Read and Write BW tests"},
	{0, "report_gbits", false, false, bwOnly, "Report Max/Average BW of test in Gbit/sec (instead of MB/sec)"},
	{0, "udp-port", true, true, nil, "UDP port of this device and of the peer's (default 4791; no 0: the exchange carries no port, so both sides name the same)"},
	{0, "stats", false, true, nil, "print the device's counters at exit"},
	{0, "timeout", true, true, nil, "give up after waiting this long for the peer, e.g. 30s (default 0: wait forever, like perftest)"},
}

func (t *Test) has(s optSpec) bool { return s.only == nil || s.only(t) }

// errUsage: print the usage and fail; errHelp, errVersion: print and succeed.
var (
	errUsage     = errors.New("usage")
	errBadOption = errors.New("bad option")
	errHelp      = errors.New("help")
	errVersion   = errors.New("version")
)

func (t *Test) defaults() params {
	p := params{
		t: t, port: defPort, ibPort: 1, size: defSizeBW, iters: defIters, txDepth: defTxBW,
		rxDepth: defRxRDMA, cqMod: defCQMod, numQPs: 1, gidIndex: -1, inline: -1,
		qpTimeout: defQPTimeout, atomic: FetchAndAdd, margin: -1,
		udpPort: rocev2.UDPPort,
	}
	if t.kind == Lat {
		p.size, p.txDepth = defSizeLat, defTxLat
	}
	if t.verb == Send {
		p.rxDepth = defRxSend
	}
	if t.kind == BW && t.verb == Write {
		p.iters = defItersWriteB
	}
	if t.verb == Atomic {
		p.size = defSizeAtomic
	}
	return p
}

// parse reads the arguments as getopt_long does for perftest (clustered
// short options, attached or separate arguments, unique long prefixes, the
// server operand anywhere), then applies perftest's dependencies.
func (t *Test) parse(args []string, stderr io.Writer) (params, error) {
	p := t.defaults()
	gp := getopt.Parser{Prog: t.name}
	var specs []optSpec // this test's options, as gp.Opts
	for _, s := range opts {
		if t.has(s) {
			specs = append(specs, s)
			gp.Opts = append(gp.Opts, getopt.Opt{Short: s.short, Long: s.long, HasArg: s.hasArg, Goroce: s.goroce})
		}
	}
	operands, err := gp.Parse(args, func(i int, val string) error { return p.set(specs[i], val, stderr) }, stderr)
	switch {
	case errors.Is(err, getopt.ErrBadOption):
		return p, errBadOption
	case errors.Is(err, getopt.ErrUsage):
		return p, errUsage
	case err != nil:
		return p, err
	}
	switch len(operands) {
	case 0:
	case 1:
		p.server = operands[0]
	default:
		fmt.Fprintf(stderr, " Invalid command line. Please check command rerun \n")
		return p, errUsage
	}
	return p, p.force(stderr)
}

// set applies one option. Numbers are read like strtol with base 0, and
// checked against perftest's limits with its words.
func (p *params) set(s optSpec, val string, stderr io.Writer) error {
	num := func(name string, lo, hi int) (int, error) {
		n, err := strconv.ParseInt(val, 0, 64)
		if err != nil || n < int64(lo) || n > int64(hi) {
			fmt.Fprintf(stderr, " %s should be between %d and %d\n", name, lo, hi)
			return 0, errUsage
		}
		return int(n), nil
	}
	unsupported := func() error {
		fmt.Fprintf(stderr, " --%s is not supported by goroce\n", s.long)
		return errUsage
	}
	var err error
	switch s.long {
	case "all":
		p.all = true
	case "atomic_type":
		switch val {
		case "CMP_AND_SWAP":
			p.atomic = CmpAndSwap
		case "FETCH_AND_ADD":
			p.atomic = FetchAndAdd
		default:
			fmt.Fprintf(stderr, " Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}\n")
			return errUsage
		}
	case "connection":
		switch val {
		case "RC":
			p.conn = RC
		case "UC":
			if p.t.verb == Read || p.t.verb == Atomic {
				fmt.Fprintf(stderr, " UC connection not possible in READ/ATOMIC verbs\n")
				return errUsage
			}
			p.conn = UC
		case "UD":
			if p.t.verb != Send {
				fmt.Fprintf(stderr, " UD connection only possible in SEND verb\n")
				return errUsage
			}
			p.conn = UD
		case "XRC", "DC", "SRD", "RawEth":
			fmt.Fprintf(stderr, " %s connections are not supported by goroce (RC, UC, UD)\n", val)
			return errUsage
		default:
			fmt.Fprintf(stderr, " Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}\n")
			return errUsage
		}
	case "ib-dev":
		p.dev = val
	case "duration":
		var n int
		if n, err = num("Duration", 1, 1<<30); err == nil {
			p.duration = time.Duration(n) * time.Second
		}
	case "events":
		if p.t.verb == Write {
			fmt.Fprintf(stderr, " Events feature not available on WRITE verb\n")
			return errUsage
		}
		p.events = true
	case "margin":
		var n int
		if n, err = num("Margin", 0, 1<<30); err == nil {
			p.margin = time.Duration(n) * time.Second
		}
	case "CPU-freq":
	case "help":
		return errHelp
	case "report-histogram":
		p.histogram = true
	case "ib-port":
		p.ibPort, err = num("IB Port", 1, 1)
	case "inline_size":
		p.inline, err = num("Inline size", 0, 912)
	case "mtu":
		p.mtu, err = num("MTU", 1, 1<<30)
	case "iters":
		p.iters, err = num("Iteration num", minIters, maxIters)
	case "noPeak":
		p.noPeak = true
	case "outs":
		p.outReads, err = num("Outstanding reads", 1, 1<<30)
	case "port":
		p.port, err = num("Port", 0, 65535)
	case "qp":
		p.numQPs, err = num("num of Qps", 1, maxQPs)
	case "cq-mod":
		p.cqMod, err = num("CQ moderation", 1, maxCQMod)
		p.reqCQMod = true
	case "rx-depth":
		p.rxDepth, err = num("Rx depth", 1, maxRx)
	case "size":
		var n int
		if n, err = num("Message size", 1, 1<<31-1); err == nil {
			p.size, p.reqSize = n, true
		}
	case "sl":
		p.sl, err = num("SL", 0, 15)
	case "tx-depth":
		p.txDepth, err = num("Tx depth", 1, maxTx)
	case "qp-timeout":
		p.qpTimeout, err = num("QP Timeout", 0, 31)
	case "report-unsorted":
		p.unsorted, p.histogram = true, true
	case "version":
		return errVersion
	case "gid-index":
		p.gidIndex, err = num("Source GID index", 0, 64)
		p.gidUser = true
	case "dont_xchg_versions":
		p.noXchgVers = true
	case "perform_warm_up":
		p.warmUp = true
	case "report_gbits":
		p.gbits = true
	case "udp-port":
		var n int
		n, err = num("UDP port", 1, 65535) // 0 (a free port) could not be told to the peer
		p.udpPort = uint16(n)
	case "stats":
		p.stats = true
	case "timeout":
		if p.timeout, err = time.ParseDuration(val); err != nil || p.timeout < 0 {
			fmt.Fprintf(stderr, " invalid duration '%s' for --timeout (e.g. 30s; 0 waits forever)\n", val)
			return errUsage
		}
	case "rdma_cm":
		p.workCM = true
	case "com_rdma_cm":
		p.useCM = true
	default: // bidirectional, report-cycles, post_list, dualport
		return unsupported()
	}
	return err
}

// force is perftest's force_dependecies: what the options imply for each
// other. It prints perftest's notes where perftest does.
func (p *params) force(stderr io.Writer) error {
	if p.duration == 0 {
		if p.txDepth > p.iters {
			p.txDepth = p.iters
		}
		if p.t.verb == Send && p.rxDepth > p.iters {
			p.rxDepth = p.iters
		}
		if (p.conn == UD || p.conn == UC) && p.rxDepth == defRxSend {
			p.rxDepth = min(p.iters, ucMaxRx)
		}
	} else {
		if p.margin < 0 {
			p.margin = p.duration / 4
		}
		if p.duration-2*p.margin <= 0 {
			fmt.Fprintf(stderr, " Duration must be greater than two margins\n")
			return errUsage
		}
		p.noPeak = true // a duration run is measured by its average
		if p.events {
			fmt.Fprint(stderr, resultLine+"Duration mode doesn't work with events.\n")
			return errUsage
		}
		if p.all {
			fmt.Fprint(stderr, resultLine+"Duration mode currently doesn't support running on all sizes.\n")
			return errUsage
		}
	}
	if p.size > cqModSizeLimit && p.conn != UD && !p.all {
		if !p.reqCQMod {
			p.cqMod = 1
		} else if p.cqMod > 1 {
			fmt.Fprint(stderr, resultLine+"Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n")
		}
	}
	if p.cqMod > p.txDepth {
		p.cqMod = p.txDepth
	}
	if p.t.verb == Read || p.t.verb == Atomic {
		p.inline = 0
	}
	if p.all {
		p.size = maxSize
	}
	if p.t.verb == Atomic && p.size != defSizeAtomic {
		fmt.Fprintf(stderr, "Message size cannot be changed for Atomic tests \n")
		return errUsage
	}
	if p.workCM {
		if p.conn == UC {
			fmt.Fprint(stderr, resultLine+" UC is not supported in librdmacm\n")
			return errUsage
		}
		if p.conn == UD {
			fmt.Fprintf(stderr, " -R with UD QPs is not supported by goroce (RC only)\n")
			return errUsage
		}
		p.useCM = true
	}
	if p.t.kind == Lat && p.numQPs > 1 {
		fmt.Fprintf(stderr, " Multiple QPs only available on bw tests\n")
		return errUsage
	}
	return nil
}

// localAddr parses -d, which in goroce names the device by its IP address.
func (p *params) localAddr() (netip.Addr, error) {
	a, err := netip.ParseAddr(p.dev)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("goroce's -d takes the IP address to bind the device to (e.g. -d 127.0.0.1), not %q", p.dev)
	}
	return a.Unmap(), nil
}

// usage prints perftest's usage text for the options goroce takes.
func (t *Test) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage:\n")
	fmt.Fprintf(w, "  %s            start a server and wait for connection\n", t.name)
	fmt.Fprintf(w, "  %s <host>     connect to server at <host>\n", t.name)
	fmt.Fprintf(w, "\nOptions:\n")
	for _, s := range opts {
		if !t.has(s) || s.goroce {
			continue
		}
		help := s.help
		switch s.long {
		case "connection":
			switch t.verb {
			case Send:
				help = "Connection type RC/UC/UD (default RC)"
			case Write:
				help = "Connection type RC/UC (default RC)"
			default:
				help = "Connection type RC (default RC)"
			}
		case "iters":
			def := defIters
			if t.kind == BW && t.verb == Write {
				def = defItersWriteB
			}
			help = fmt.Sprintf("Number of exchanges (at least %d, default %d)", minIters, def)
		case "size":
			def := defSizeBW
			if t.kind == Lat {
				def = defSizeLat
			}
			help = fmt.Sprintf("Size of message to exchange (default %d)", def)
		}
		name := "      --" + s.long
		if s.short != 0 {
			name = fmt.Sprintf("  -%c, --%s", s.short, s.long)
		}
		if s.hasArg {
			name += "=<value>"
		}
		fmt.Fprintf(w, "%s  %s\n", name, help)
	}
	fmt.Fprintf(w, "\ngoroce options (one or two dashes):\n")
	for _, s := range opts {
		if s.goroce {
			fmt.Fprintf(w, "  -%s  %s\n", s.long, s.help)
		}
	}
}
