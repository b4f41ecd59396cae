// Command smc-relay relays TCP to SMC-R and back, for programs that
// cannot speak SMC-R themselves (a Go library cannot be preloaded into
// redis-server, curl or iperf, as Linux's smc_run preloads its library):
//
//	smc-relay -listen tcp:ADDR:PORT -dial smc:ADDR:PORT    TCP in, SMC-R out
//	smc-relay -listen smc:ADDR:PORT -dial tcp:ADDR:PORT    SMC-R in, TCP out
//
// Two relays put SMC-R between an unmodified TCP client and server: the
// client connects to the first (tcp → smc), which dials the second
// (smc → tcp), which dials the server. Each accepted connection gets one
// dialled connection, and bytes flow both ways, as they would over TCP:
// an end of stream on one side shuts the other down for writing (the
// other direction flows on), an abort on one side aborts the other, and a
// side that fails or closes ends the other. Memory is bounded per
// connection: two -buffer-sized buffers (and the SMC-R side's RMB and send
// buffer of that size); a slow side holds the other back (back-pressure,
// both ways) rather than being buffered for.
//
// SMC is signalled as smcat signals it: as root the SMC TCP option goes
// into the SMC-R side's handshakes (Linux's AF_SMC peers need it), a peer
// that does not send it gets TCP on that side (a fallback, which -v and
// smcss show); -peer-speaks-smc (both relays) speaks SMC without the
// option, as any user may. -ueid NAME offers SMC-Rv2. Each connection's
// mode is in smcss, its counters in smcr stats: smc-relay publishes them.
//
// -n N exits after N connections (default: serve until a signal); -max-conns
// bounds the connections relayed at once (more wait in the listen
// backlog). The first SIGINT or SIGTERM aborts every connection and waits
// for the link groups to end (a second exits at once): exit status 128 +
// the signal. Otherwise the exit status is 0, or 1 if a connection failed
// (could not be dialled, or was aborted), 2 for a bad command line or when
// SMC cannot be set up.
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
	"strings"
	"time"

	"github.com/goroce/goroce/cmd/internal/smcflag"
	"github.com/goroce/goroce/internal/rundir"
	"github.com/goroce/goroce/smcr"
)

func main() {
	ctx, status := rundir.NotifyContext(context.Background())
	os.Exit(status(run(ctx, os.Args[1:], os.Stderr)))
}

const (
	exitOK    = 0
	exitConn  = 1
	exitSetup = 2
)

// endpoint is one side of the relay: tcp:ADDR:PORT or smc:ADDR:PORT.
type endpoint struct {
	smc  bool
	addr string     // HOST:PORT
	src  netip.Addr // -s: the dialled side's source address (and SMC-R device)
}

func (e endpoint) String() string {
	if e.smc {
		return "smc:" + e.addr
	}
	return "tcp:" + e.addr
}

func parseEndpoint(s string) (endpoint, error) {
	kind, addr, ok := strings.Cut(s, ":")
	var e endpoint
	switch {
	case !ok:
	case kind == "tcp":
		e.addr = addr
	case kind == "smc":
		e.smc, e.addr = true, addr
	default:
		ok = false
	}
	if !ok {
		return e, fmt.Errorf("%q: want tcp:ADDR:PORT or smc:ADDR:PORT", s)
	}
	host, port, err := net.SplitHostPort(e.addr)
	if err != nil {
		return e, fmt.Errorf("%q: %v (an IPv6 address goes in brackets: smc:[::1]:5000)", s, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return e, fmt.Errorf("%q: bad port %q", s, port)
	}
	if e.smc && host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			return e, fmt.Errorf("%q: an SMC-R side takes an IP address (its goroce device is on it), not %q", s, host)
		}
	}
	return e, nil
}

// options are smc-relay's settings.
type options struct {
	listen, dial endpoint
	flags        smcflag.Flags
	verbose      bool
	conns        int
	maxConns     int
	timeout      time.Duration
}

var errHelp = errors.New("help")

func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	var listen, dial string
	src := smcflag.Addr{A: &o.dial.src}
	fs := flag.NewFlagSet("smc-relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&listen, "listen", "", "accept on `tcp:ADDR:PORT` or smc:ADDR:PORT")
	fs.StringVar(&dial, "dial", "", "relay each connection to `tcp:ADDR:PORT` or smc:ADDR:PORT")
	fs.Var(src, "s", "dial from this source `address` (for smc: the goroce device's too)")
	fs.BoolVar(&o.verbose, "v", false, "say what each connection became on each side (TCP, SMC-R v2/v1, a fallback and its reason) and how it ended")
	fs.BoolVar(&o.flags.SpeaksSMC, "peer-speaks-smc", false, "unprivileged mode: send no SMC TCP option and speak SMC anyway on the SMC-R side; the peer must be told the same")
	fs.Var((*smcflag.StringList)(&o.flags.UEIDs), "ueid", "a user-defined EID (`NAME`) for SMC-Rv2, repeatable; without one only SMC-Rv1 is offered")
	fs.DurationVar(&o.flags.Linger, "linger", 10*time.Second, "SMC-R link groups without connections end after this `duration`; 0: Linux's 10 minutes")
	fs.IntVar(&o.flags.BufSize, "buffer", 64<<10, "`bytes` of each direction's relay buffer, and of the SMC-R side's RMB and send buffer (16 KiB to 1 MiB)")
	fs.IntVar(&o.conns, "n", 0, "exit after `N` connections (0: serve until a signal)")
	fs.IntVar(&o.maxConns, "max-conns", 1024, "relay at most `N` connections at once (more wait to be accepted)")
	fs.DurationVar(&o.timeout, "w", 10*time.Second, "`timeout` of each dial")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: smc-relay -listen tcp:ADDR:PORT -dial smc:ADDR:PORT [flags]\n       smc-relay -listen smc:ADDR:PORT -dial tcp:ADDR:PORT [flags]\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, errHelp
		}
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected operand %q", fs.Arg(0))
	}
	if listen == "" || dial == "" {
		return o, errors.New("want -listen and -dial")
	}
	var err error
	s := o.dial.src
	if o.listen, err = parseEndpoint(listen); err != nil {
		return o, fmt.Errorf("-listen %w", err)
	}
	if o.dial, err = parseEndpoint(dial); err != nil {
		return o, fmt.Errorf("-dial %w", err)
	}
	o.dial.src = s
	switch {
	case o.listen.smc == o.dial.smc:
		return o, fmt.Errorf("one side is tcp and the other smc, not both %s", map[bool]string{true: "smc", false: "tcp"}[o.dial.smc])
	case o.flags.BufSize < 16<<10 || o.flags.BufSize > 1<<20:
		return o, fmt.Errorf("-buffer %d: want 16 KiB to 1 MiB", o.flags.BufSize)
	case o.conns < 0 || o.maxConns < 1:
		return o, fmt.Errorf("-n %d, -max-conns %d: want counts", o.conns, o.maxConns)
	case o.flags.Linger < 0 || o.timeout < 0:
		return o, errors.New("durations must not be negative")
	}
	return o, nil
}

// run is smc-relay with its arguments; it returns the exit status.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	o, err := parseArgs(args, stderr)
	switch {
	case errors.Is(err, errHelp):
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "smc-relay: %v\nrun smc-relay -h for the usage\n", err)
		return exitSetup
	}
	log := &logger{Prog: "smc-relay", W: stderr, Verbose: o.verbose}
	cfg := o.flags.Config()
	var ln net.Listener
	if o.listen.smc {
		ln, err = smcr.Listen("tcp", o.listen.addr, &cfg)
	} else {
		ln, err = net.Listen("tcp", o.listen.addr)
	}
	if err != nil {
		if msg := smcflag.SetupError(err, "smc-relay"); msg != "" {
			log.Errorf("%s", msg)
		} else {
			log.Errorf("listen on %v: %v", o.listen, err)
		}
		return exitSetup
	}
	pub, err := smcr.Publish("")
	if err != nil {
		log.Errorf("warning: smcss and smcr stats will not see this process: %v", err)
	}
	log.Infof("relaying %v (%v) to %v", o.listen, ln.Addr(), o.dial)
	r := &relay{dial: dialer(o.dial, cfg, o.timeout), bufSize: o.flags.BufSize, log: log, verbose: o.verbose}
	r.serve(ctx, ln, o.conns, o.maxConns) // a signal ends every connection
	waitLinkGroups(o.flags.Linger, log)
	if pub != nil {
		pub.Close()
	}
	if r.failed.Load() > 0 {
		return exitConn
	}
	return exitOK
}

// waitLinkGroups waits (at most the linger and a margin for the closes and
// DELETE_LINK) for the link groups to end, so that the peers see DELETE_LINK
// rather than a link that vanished; with Linux's linger (--linger 0) it
// does not wait.
func waitLinkGroups(linger time.Duration, log *logger) {
	if linger == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), linger+20*time.Second)
	defer cancel()
	if err := smcr.WaitIdle(ctx); err != nil {
		log.Errorf("warning: link groups still up at exit: %v", err)
	}
}

// logger writes smc-relay's messages to stderr.
type logger = smcflag.Logger
