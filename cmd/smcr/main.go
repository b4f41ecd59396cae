// Command smcr shows the SMC-R statistics and link groups of running
// goroce programs as smc-tools' smcr shows a Linux host's:
//
//	smcr [-d] [--pid PID] stats [show | json]       smcr stats
//	smcr [-d | -dd] linkgroup [show | link-show] [all | LG-ID]
//
// A Linux kernel counts for every program of the host; a goroce program
// counts its own, and publishes its counters and link groups with its
// SMC sockets (smcr.Publish: smcat and smc-relay do). smcr reads every
// publishing process of the user's (of every user's, for root, each
// believed only as its owner's; see smcss) and sums their statistics, or
// shows one process's with --pid. Options come before the object, as
// smc-tools' (abbreviated: -d for -details, -dd for -ddetails); -a
// (-absolute) is accepted: goroce's counters start with each process and
// smcr keeps no reset point, so every figure is absolute. --run-dir DIR
// reads that directory alone.
//
// The layouts are smc-tools': stats with its summary, RX, TX and extras
// blocks (-d adds the client and server split, the top fallback reasons
// per side, downgrades and reuses, and the processes summed), and json
// its SMCR object of counters; linkgroup show a line per link group,
// link-show a line per link (-d adds the link's user id, device and port,
// -dd its GIDs and QP numbers). goroce adds to each line the process and
// its device's address, and to stats its CDC and LLC message counts.
//
// Exit status: 0, 1 if the run directory cannot be read or is not
// trusted, 2 for a bad command line.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/internal/rundir"
	"github.com/goroce/goroce/smcr"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// options are the global options, before the object.
type options struct {
	detail int // -d 1, -dd 2
	pid    int // --pid: one process
	dir    string
}

const usageText = `Usage: smcr  [ OPTIONS ] OBJECT {COMMAND | help}
where  OBJECT := {linkgroup | stats}
       OPTIONS := {-v[ersion] | -d[etails] | -dd[etails] | -a[bsolute] | --pid PID | --run-dir DIR}
       smcr stats [show | json]
       smcr linkgroup [show | link-show] [all | LG-ID]
`

var errUsage = errors.New("usage")

// isPrefix reports whether s abbreviates word (smc-tools' contains()).
func isPrefix(s, word string) bool { return s != "" && strings.HasPrefix(word, s) }

func parseOptions(args []string, stderr io.Writer) (options, []string, error) {
	var o options
	for len(args) > 0 {
		a := args[0]
		if a == "--" {
			args = args[1:]
			break
		}
		if !strings.HasPrefix(a, "-") {
			break
		}
		opt := strings.TrimPrefix(a, "-") // --details as -details
		if strings.HasPrefix(opt, "-") {
			opt = opt[1:]
		}
		switch {
		case opt == "pid" || opt == "run-dir":
			if len(args) < 2 {
				fmt.Fprintf(stderr, "Error: Option %q needs a value.\n", a)
				return o, nil, errUsage
			}
			if opt == "run-dir" {
				o.dir = args[1]
			} else if n, err := strconv.Atoi(args[1]); err != nil || n <= 0 {
				fmt.Fprintf(stderr, "Error: --pid %q: want a process id.\n", args[1])
				return o, nil, errUsage
			} else {
				o.pid = n
			}
			args = args[1:]
		case opt == "ad" || opt == "da":
			o.detail = 1
		case isPrefix(opt, "absolute"):
		case isPrefix(opt, "version"):
			return o, nil, errVersion
		case isPrefix(opt, "details"):
			o.detail = 1
		case isPrefix(opt, "ddetails"):
			o.detail = 2
		case isPrefix(opt, "help"):
			return o, nil, errHelp
		default:
			fmt.Fprintf(stderr, "Error: Option %q is unknown, try \"smcr help\".\n", a)
			return o, nil, errUsage
		}
		args = args[1:]
	}
	return o, args, nil
}

var (
	errVersion = errors.New("version")
	errHelp    = errors.New("help")
)

func run(args []string, stdout, stderr io.Writer) int {
	o, rest, err := parseOptions(args, stderr)
	switch {
	case errors.Is(err, errVersion):
		fmt.Fprintln(stdout, "smcr utility, goroce")
		return 0
	case errors.Is(err, errHelp):
		fmt.Fprint(stdout, usageText)
		return 0
	case err != nil:
		fmt.Fprint(stderr, usageText)
		return 2
	}
	if len(rest) == 0 || isPrefix(rest[0], "help") {
		fmt.Fprint(stdout, usageText)
		return 0
	}
	var cmd func(*options, []*smcr.Published, []string, io.Writer) error
	switch {
	case isPrefix(rest[0], "stats"):
		cmd = stats
	case isPrefix(rest[0], "linkgroup"):
		cmd = linkGroups
	default:
		fmt.Fprintf(stderr, "Error: Object %q is unknown, try \"smcr help\".\n", rest[0])
		return 2
	}
	procs, err := gather(&o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "smcr: %v\n", err)
		return 1
	}
	if len(procs) == 0 {
		fmt.Fprintln(stderr, "smcr: no running goroce process publishes its SMC sockets (smcat and smc-relay do): all counters are 0")
	}
	if err := cmd(&o, procs, rest[1:], stdout); err != nil {
		fmt.Fprintf(stderr, "smcr: %v\n", err)
		fmt.Fprint(stderr, usageText)
		return 2
	}
	return 0
}

// readTimeout bounds how long one process may take to answer.
const readTimeout = 2 * time.Second

// gather reads the publishing processes (--pid: that one), sorted by PID.
func gather(o *options, stderr io.Writer) ([]*smcr.Published, error) {
	procs, err := smcr.ReadRunning(o.dir, readTimeout, func(err error) {
		fmt.Fprintf(stderr, "smcr: %s\n", rundir.Printable(err.Error()))
	})
	if err != nil || o.pid == 0 {
		return procs, err
	}
	for _, p := range procs {
		if p.PID == o.pid {
			return []*smcr.Published{p}, nil
		}
	}
	return nil, fmt.Errorf("no goroce process %d publishes its SMC sockets (smcss lists those that do)", o.pid)
}
