// Command smcss lists the SMC sockets of running goroce programs, as
// smc-tools' smcss lists a Linux host's AF_SMC sockets.
//
// A goroce program's SMC sockets live in its process; programs that
// publish them (smcr.Publish: smcat does) answer on a Unix socket in the
// goroce run directory ($GOROCE_RUN_DIR, else $XDG_RUNTIME_DIR/goroce,
// else /tmp/goroce-UID), and smcss asks each. It believes only a run
// directory of the user's that nobody else may write to, and only sockets
// that a process of the user's serves (others are reported and skipped);
// it removes the sockets of processes that died. As root it lists every
// user's processes, as smc-tools' smcss lists every user's sockets for
// root: each user's run directory (at the default places: see
// rundir.Dirs) and sockets are believed only if that user owns and
// serves them. Without options it lists
// the connected sockets, SMC-R and fallback ones (Mode "TCP" with Linux's
// fallback reason code, and the peer's when it declined); -a adds the
// listening ones, -l shows only those; -e (or smc-tools' -d, --debug)
// adds the buffers, token, shutdown state and byte counters; -R shows
// only SMC-R connections, with
// their link: link group, link id, QPNs and GIDs. The columns are smcss's
// where they mean the same; Inode (a goroce socket has none) is replaced
// by the program's PID, and Intf by the goroce device in -R. Options are
// smc-tools' (clustered, -aR, or long, --all --smcr); --run-dir DIR reads
// that directory alone.
//
// Exit status: 0, or 1 if the run directory cannot be read or is not
// trusted.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/goroce/goroce/cmd/internal/getopt"
	"github.com/goroce/goroce/internal/rundir"
	"github.com/goroce/goroce/smcr"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options select what smcss shows.
type options struct {
	all, listening, extended, smcr, smcd, wide bool
	dir                                        string // --run-dir: this directory alone
}

// smcss's options, smc-tools' (getopt_long: clustered, abbreviated)
// and goroce's --run-dir. -d (--debug) is smc-tools' additional debug
// information, such as the shutdown state: what -e shows.
var opts = []getopt.Opt{
	{Short: 'a', Long: "all"}, {Short: 'l', Long: "listening"}, {Short: 'e', Long: "extended"},
	{Short: 'd', Long: "debug"}, {Short: 'D', Long: "smcd"}, {Short: 'R', Long: "smcr"},
	{Short: 'W', Long: "wide"}, {Short: 'V', Long: "version"}, {Short: 'v'}, {Short: 'h', Long: "help"},
	{Long: "run-dir", HasArg: true, Goroce: true},
}

var errVersion = errors.New("version")

const usageText = `Usage: smcss [ OPTIONS ]
	-h, --help          this message
	-V, --version       show version information
	-a, --all           show all sockets
	-l, --listening     show listening sockets
	-e, --extended      show detailed socket information
	-d, --debug         show additional debug information, such as the shutdown state (as -e)
	-W, --wide          do not truncate IP addresses
	-D, --smcd          show only SMC-D sockets (goroce has none)
	-R, --smcr          show detailed SMC-R information (shows only SMC-R sockets)
	--run-dir DIR       read the goroce run directory DIR only (default: $GOROCE_RUN_DIR, else
	                    $XDG_RUNTIME_DIR/goroce, else /tmp/goroce-UID; as root, every user's too)
	no OPTIONS          show all connected sockets
`

func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	p := getopt.Parser{Prog: "smcss", Opts: opts}
	operands, err := p.Parse(args, func(i int, val string) error {
		switch opts[i].Short {
		case 'a':
			o.all = true
		case 'l':
			o.listening = true
		case 'e', 'd':
			o.extended = true
		case 'D':
			o.smcd = true
		case 'R':
			o.smcr = true
		case 'W':
			o.wide = true
		case 'V', 'v':
			return errVersion
		case 'h':
			return flag.ErrHelp
		default:
			o.dir = val
		}
		return nil
	}, stderr)
	if err != nil {
		return o, err
	}
	if len(operands) > 0 {
		return o, fmt.Errorf("unexpected operand %q", operands[0])
	}
	for _, bad := range []struct {
		both bool
		what string
	}{
		{o.smcr && o.smcd, "--smcd together with --smcr"},
		{o.listening && o.extended, "--listening together with --extended"},
		{o.listening && o.all, "--listening together with --all"},
		{o.listening && o.smcr, "--listening together with --smcr"},
		{o.listening && o.smcd, "--listening together with --smcd"},
	} {
		if bad.both {
			return o, fmt.Errorf("%s is not supported", bad.what)
		}
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usageText)
		return 0
	case errors.Is(err, errVersion):
		fmt.Fprintln(stdout, "smcss utility, goroce")
		return 0
	case errors.Is(err, getopt.ErrBadOption), errors.Is(err, getopt.ErrUsage):
		fmt.Fprint(stderr, usageText)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "smcss: %v\n", err)
		fmt.Fprint(stderr, usageText)
		return 2
	}
	procs, err := smcr.ReadRunning(o.dir, readTimeout, func(err error) {
		fmt.Fprintf(stderr, "smcss: %s\n", rundir.Printable(err.Error()))
	})
	if err != nil {
		fmt.Fprintf(stderr, "smcss: %v\n", err)
		return 1
	}
	if o.smcd {
		procs = nil // goroce speaks SMC-R only: no SMC-D socket to show
	}
	fmt.Fprint(stdout, format(procs, &o))
	return 0
}

// readTimeout bounds how long one process may take to answer.
const readTimeout = 2 * time.Second
