// Command smcat is netcat over SMC-R on a goroce device.
//
//	smcat [-s SRCADDR] ADDR PORT            dial ADDR PORT
//	smcat -l [-k] [--echo] [-n N] ADDR PORT listen on ADDR PORT
//
// stdin goes to the connection and the connection to stdout. At stdin's
// EOF smcat shuts the connection down for writing (--end: or closes it, or
// aborts it) and exits once the peer has closed its side. -k serves
// connections at once; --echo sends back what each one sends; -n exits
// after N connections.
//
// How SMC capability is signalled: as root, smcat puts the SMC TCP option
// (kind 254, ExID 0xE2D4C3D9) into its TCP handshakes with a sock_ops BPF
// program, as Linux does, and speaks SMC to peers whose handshake carries
// it, a Linux AF_SMC socket included; a peer that does not speak SMC gets
// the same connection as plain TCP (a fallback); -v says which, and why,
// with Linux's decline code. Without root the option cannot be sent:
// -peer-speaks-smc, on both sides, has both speak SMC because they were
// told to, and refuses a peer that then does not (a Linux peer, which
// requires the option, included): the connection fails, and says why.
//
// -dev ADDR (repeatable) gives smcat's stack a goroce device on each
// address, listener and dialer alike (-s stays a dialer's TCP source
// address): the first carries each link group's first link, the others
// alternate paths, on which the link groups get a second link, and to
// which connections move when a path fails; -v prints each link as it
// comes and goes.
//
// -ueid NAME (repeatable) offers SMC-Rv2 with that EID, as `smcr ueid add`
// does on Linux; without one only SMC-Rv1 is offered. --linger sets how
// long a link group outlives its last connection: 2 s by default, since
// smcat is short-lived (Linux keeps an unused link group 10 minutes), and
// smcat waits for its connections to finish closing and its link groups
// to end (DELETE_LINK) before it exits; --linger 0 keeps Linux's 10
// minutes and does not wait (the link groups vanish with the process, and
// the peers notice when their TEST_LINK goes unanswered). -capture FILE
// records the goroce device's packets (LLC, CDC and the RDMA WRITEs; the
// CLC handshake is TCP) for rocedump or Wireshark.
//
// smcat publishes its sockets in the goroce run directory
// ($GOROCE_RUN_DIR, else $XDG_RUNTIME_DIR/goroce, else /tmp/goroce-UID):
// smcss lists them.
//
// Exit status: 0 on success, 1 if a connection failed (the peer's abort
// among them, unless --peer-abort expects it; a server serves on after a
// failed connection and exits 1 at its end), 2 for a bad command
// line or when SMC cannot be set up (no privileges for the TCP option
// without -peer-speaks-smc, a capture file that cannot be created).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/goroce/goroce/cmd/internal/smcflag"
	"github.com/goroce/goroce/internal/backendflag"
	"github.com/goroce/goroce/internal/rundir"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/smcr"
)

func main() {
	// The first SIGINT or SIGTERM closes the listener and connections and
	// completes the capture; a second ends the process at once (removing
	// its publishing socket).
	ctx, status := rundir.NotifyContext(context.Background())
	os.Exit(status(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)))
}

// Exit statuses.
const (
	exitOK    = 0
	exitConn  = 1
	exitSetup = 2
)

// run is smcat with its arguments and streams; it returns the exit status.
// ctx ends the run early (a signal): listeners and connections close.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parseArgs(args)
	if errors.Is(err, errHelp) {
		usage(stdout)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "smcat: %v\nrun smcat -h for the usage\n", err)
		return exitSetup
	}
	log := &logger{Prog: "smcat", W: stderr, Verbose: o.verbose}
	cfg := config(&o)
	if o.verbose {
		cfg.OnLink = func(e smcr.LinkEvent) { log.Lines(describeLink(e)) }
	}
	var capt *capture
	if o.capture != "" {
		if capt, err = openCapture(o.capture, &cfg); err != nil {
			log.Errorf("%v", err)
			return exitSetup
		}
	}
	pubRelease := publish(log)
	var code int
	if o.listen {
		code = serve(ctx, &o, &cfg, stdin, stdout, log)
	} else if o.pattern > 0 {
		code = dialPattern(ctx, &o, &cfg, stdout, log)
	} else {
		code = dial(ctx, &o, &cfg, stdin, stdout, log)
	}
	if o.linger > 0 && code != exitSetup {
		waitLinkGroups(o.linger, log)
	}
	pubRelease()
	if capt != nil {
		if err := capt.close(); err != nil {
			log.Errorf("%v", err)
			if code == exitOK {
				code = exitConn
			}
		} else {
			log.Infof("capture written to %s", o.capture)
		}
	}
	return code
}

// config is the smcr configuration of the options.
func config(o *options) smcr.Config {
	f := smcflag.Flags{SpeaksSMC: o.speaksSMC, UEIDs: o.ueids, Linger: o.linger, BufSize: o.bufSize}
	cfg := f.Config()
	cfg.Devices = o.devs
	cfg.TestLinkInterval = o.testLink
	if o.backend != "" && o.backend != backendflag.UDP {
		spec := backendflag.Spec{Kind: o.backend, Iface: o.iface}
		cfg.Backend = func(ap netip.AddrPort) (backend.Backend, error) {
			s := spec
			s.Port = ap.Port()
			b, _, err := backendflag.Open(s, ap.Addr())
			return b, err
		}
	}
	return cfg
}

// setupError explains an error of Listen or Dial that comes before any
// connection (the TCP option cannot be sent), or returns "". The whole
// error chain is for -v.
func setupError(err error, log *logger) string {
	msg := smcflag.SetupError(err, "smcat")
	if msg != "" {
		log.Infof("detail: %v", err)
	}
	return msg
}

// waitLinkGroups waits (at most linger and a margin for the last closes
// and DELETE_LINK) for the process's connections to finish closing and
// its link groups to end, so that the peers see the closes and
// DELETE_LINK instead of a link that vanished with the process. A
// signal does not cut this short; a second one ends the process.
func waitLinkGroups(linger time.Duration, log *logger) {
	limit := linger + 20*time.Second // a client's groups linger up to 10 s longer, then DELETE_LINK
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := smcr.WaitIdle(ctx); err != nil {
		log.Errorf("warning: link groups still up %v after the last connection (exiting anyway): %v", limit, err)
		return
	}
	log.Infof("link groups ended")
}

// publisher is the process's publishing socket, shared by the runs of
// this process (tests run several) and closed by the last.
var publisher struct {
	sync.Mutex
	p    *smcr.Publisher
	refs int
}

// publish makes the process's SMC sockets visible to smcss; a failure is
// only a warning. The returned function stops publishing.
func publish(log *logger) func() {
	publisher.Lock()
	defer publisher.Unlock()
	if publisher.refs == 0 {
		p, err := smcr.Publish("")
		if err != nil {
			log.Errorf("warning: smcss will not list this process: %v", err)
			return func() {}
		}
		publisher.p = p
	}
	publisher.refs++
	return func() {
		publisher.Lock()
		defer publisher.Unlock()
		if publisher.refs--; publisher.refs == 0 {
			publisher.p.Close()
			publisher.p = nil
		}
	}
}

// logger writes smcat's messages to stderr.
type logger = smcflag.Logger
