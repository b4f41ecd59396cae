package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/cmd/internal/smcflag"
	"github.com/goroce/goroce/internal/backendflag"
)

// options are smcat's settings.
type options struct {
	listen    bool          // -l
	keep      bool          // -k: serve connections at once, keep listening
	echo      bool          // --echo: send back what each connection sends
	conns     int           // -n: connections to serve, then exit (0: -k's forever)
	src       netip.Addr    // -s: the dialer's source address (and device)
	devs      []netip.Addr  // -dev, repeatable: the goroce devices (the first the primary)
	ueids     []string      // -ueid, repeatable
	verbose   bool          // -v
	speaksSMC bool          // -peer-speaks-smc: no TCP option, both sides configured
	end       string        // --end: shut, close or abort
	peerAbort bool          // --peer-abort: the peer's abort is the expected end
	linger    time.Duration // --linger: link group linger; wait for it at exit
	testLink  time.Duration // -testlink: TEST_LINK an idle link after this (0: Linux's 30 s)
	capture   string        // -capture FILE: pcapng of the goroce device
	timeout   time.Duration // -w: connect timeout
	bufSize   int           // -buffer: RMB and send buffer size
	parallel  int           // -P: a client's connections at once (one device, one link group)
	pattern   int64         // -pattern: bytes of generated data per connection, echo checked
	backend   string        // -backend: the goroce device's packet backend
	iface     string        // -i: its interface (-backend afpacket)
	addr      string
	port      string
}

// maxParallel bounds -P: a link group takes 255 connections.
const maxParallel = 255

// defaultLinger is smcat's link group linger: short, since it waits for its
// link groups to end before it exits.
const defaultLinger = 2 * time.Second

const (
	endShut  = "shut"
	endClose = "close"
	endAbort = "abort"
)

// errHelp asks for the usage on stdout and exit status 0.
var errHelp = errors.New("help")

// usageError is a bad command line: the message, then the usage, exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// addrList is a repeatable IP address flag (-dev).
type addrList []netip.Addr

func (l *addrList) String() string {
	s := make([]string, len(*l))
	for i, a := range *l {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

func (l *addrList) Set(v string) error {
	var a netip.Addr
	if err := (smcflag.Addr{A: &a}).Set(v); err != nil {
		return err
	}
	*l = append(*l, a)
	return nil
}

// newFlagSet defines smcat's flags on o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("smcat", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse reports errors itself
	fs.BoolVar(&o.listen, "l", false, "listen on ADDR PORT (PORT 0: any free port, printed with -v)")
	fs.BoolVar(&o.keep, "k", false, "with -l: serve connections at once and keep listening (until -n connections)")
	fs.BoolVar(&o.echo, "echo", false, "with -l: send back what each connection sends (stdin is not read)")
	fs.IntVar(&o.conns, "n", 0, "with -l: exit after `N` connections (default: 1, or with -k none)")
	fs.Var(smcflag.Addr{A: &o.src}, "s", "dial from this source `address` (the goroce device's too, unless -dev)")
	fs.Var((*addrList)(&o.devs), "dev", "a goroce device on this `address`, repeatable: the first carries each link group's first link, the others alternate paths (a second link; connections move there when a path fails); default: the connection's own address")
	fs.Var((*smcflag.StringList)(&o.ueids), "ueid", "a user-defined EID (`NAME`) for SMC-Rv2, repeatable, as Linux's smcr ueid add sets them; without one only SMC-Rv1 is offered")
	fs.BoolVar(&o.verbose, "v", false, "print on stderr what each connection became: SMC-R v2/v1 or TCP fallback with the reason, and its link")
	fs.BoolVar(&o.speaksSMC, "peer-speaks-smc", false, "unprivileged mode: send no SMC TCP option and speak SMC anyway; the peer must be told the same (a peer that does not speak SMC, a Linux one included, is refused)")
	fs.StringVar(&o.end, "end", endShut, "how a connection ends (a client at stdin's EOF, an echo server at the peer's EOF): `shut` (shut down writing, read to the peer's EOF), close, or abort (close with data unread)")
	fs.BoolVar(&o.peerAbort, "peer-abort", false, "the peer is expected to abort: its reset ends the connection successfully")
	fs.DurationVar(&o.linger, "linger", defaultLinger, "link groups without connections end after this `duration` (DELETE_LINK), and smcat waits for that before it exits; 0: Linux's 10 minutes, and no wait (the link groups vanish with smcat)")
	fs.DurationVar(&o.testLink, "testlink", 0, "a link idle this `duration` is checked with TEST_LINK (default Linux's 30 s): a device whose address went away finds out at its next send")
	fs.StringVar(&o.capture, "capture", "", "write the goroce device's RoCE packets (LLC, CDC, RDMA WRITEs) to this pcapng `file`")
	fs.DurationVar(&o.timeout, "w", 0, "connect `timeout` (default: the system's)")
	fs.IntVar(&o.bufSize, "buffer", 0, "RMB and send buffer `bytes` per connection, 16 KiB to 1 MiB (default 64 KiB)")
	fs.IntVar(&o.parallel, "P", 1, "dial `N` connections at once from one device (so in one link group); more than 1 needs -pattern")
	fs.StringVar(&o.backend, "backend", backendflag.UDP, "the goroce device's "+backendflag.FlagHelp)
	fs.StringVar(&o.iface, "i", "", "the network `interface` of -backend afpacket (default: the one that has the device's address)")
	fs.Int64Var(&o.pattern, "pattern", 0, "instead of stdin, send each connection `bytes` of a generated stream (its own per connection), check that the peer echoes it back exactly, and print a line per connection on stdout")
	return fs
}

// shortBools are the boolean one-letter flags that may be clustered (-lkv).
const shortBools = "lkv"

// parseArgs parses smcat's command line. Flags and the two operands may
// come in any order, as getopt permutes them; boolean one-letter flags may
// be clustered (-lk); "--" ends the flags.
func parseArgs(args []string) (options, error) {
	var o options
	fs := newFlagSet(&o)
	var operands []string
	rest := expandClusters(args)
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return o, errHelp
			}
			return o, usagef("%v", err)
		}
		left := fs.Args()
		if used := len(rest) - len(left); used > 0 && rest[used-1] == "--" {
			operands = append(operands, left...) // after "--", only operands
			break
		}
		if rest = left; len(rest) > 0 {
			operands = append(operands, rest[0])
			rest = rest[1:]
		}
	}
	if len(operands) != 2 {
		return o, usagef("want ADDR and PORT, got %d operand(s)", len(operands))
	}
	o.addr, o.port = operands[0], operands[1]
	if p, err := strconv.ParseUint(o.port, 10, 16); err != nil || (p == 0 && !o.listen) {
		return o, usagef("bad port %q", o.port)
	}
	switch o.end {
	case endShut, endClose, endAbort:
	default:
		return o, usagef("--end %q: want shut, close or abort", o.end)
	}
	switch {
	case o.conns < 0:
		return o, usagef("-n %d: want a count of connections", o.conns)
	case !o.listen && (o.keep || o.echo || o.conns > 0):
		return o, usagef("-k, --echo and -n go with -l")
	case o.listen && o.src.IsValid():
		return o, usagef("-s goes with dialing; a listener's address is ADDR")
	case o.parallel < 1 || o.parallel > maxParallel:
		return o, usagef("-P %d: want 1 to %d connections", o.parallel, maxParallel)
	case o.pattern < 0:
		return o, usagef("-pattern %d: want a byte count", o.pattern)
	case o.listen && (o.parallel > 1 || o.pattern > 0):
		return o, usagef("-P and -pattern go with dialing")
	case o.parallel > 1 && o.pattern == 0:
		return o, usagef("-P %d needs -pattern: stdin cannot feed %d connections", o.parallel, o.parallel)
	case o.linger < 0 || o.timeout < 0 || o.testLink < 0:
		return o, usagef("durations must not be negative")
	case o.backend != backendflag.UDP && o.backend != backendflag.AFPacket && o.backend != backendflag.Shm && o.backend != backendflag.Auto:
		return o, usagef("-backend %q: want udp, afpacket, shm or auto", o.backend)
	case o.iface != "" && o.backend != backendflag.AFPacket:
		return o, usagef("-i goes with -backend afpacket")
	}
	for i, a := range o.devs {
		if a.IsUnspecified() {
			return o, usagef("-dev %v: a device needs a specific address", a)
		}
		for _, b := range o.devs[:i] {
			if a == b {
				return o, usagef("-dev %v given twice", a)
			}
		}
	}
	if o.listen && o.conns == 0 && !o.keep {
		o.conns = 1
	}
	return o, nil
}

// expandClusters turns -lkv into -l -k -v (only for the boolean
// one-letter flags; anything else is left to the flag package).
func expandClusters(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.Trim(a[1:], shortBools) == "" {
			for _, c := range a[1:] {
				out = append(out, "-"+string(c))
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

const usageText = `usage: smcat [-v] [-peer-speaks-smc] [-ueid NAME]... [-s SRCADDR] [-dev DEVADDR]... ADDR PORT
       smcat [-P N] -pattern BYTES [-v] [-s SRCADDR] [-dev DEVADDR]... ... ADDR PORT
       smcat -l [-k] [--echo] [-n N] [-v] [-peer-speaks-smc] [-ueid NAME]... [-dev DEVADDR]... ADDR PORT

netcat over SMC-R on a goroce device: stdin goes to the connection, the
connection to stdout. At stdin's EOF the connection is shut down for
writing (--end), and smcat exits once the peer closes. With -pattern it
checks an echo peer instead: each of -P connections sends generated data
and compares what comes back.

SMC is spoken only to a peer known to speak it. As root, smcat puts the
SMC TCP option into its handshakes (as Linux does) and speaks SMC to peers
whose handshake carries it, Linux's AF_SMC included; any other peer gets
plain TCP (a fallback, reported by -v and smcss). Without root, pass
-peer-speaks-smc on both sides: no option is sent, and both sides speak SMC
because they were told to; a peer that turns out not to speak it is
refused (a connection to it fails, one from it is closed).

Exit status: 0 on success, 1 if a connection failed, 2 for a bad command
line or when SMC cannot be set up (e.g. no privileges for the TCP option).

flags:
`

// usage prints the usage and the flags.
func usage(w io.Writer) {
	var o options
	fs := newFlagSet(&o)
	fs.SetOutput(w)
	fmt.Fprint(w, usageText)
	fs.PrintDefaults()
}
