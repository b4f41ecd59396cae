// Command smcss lists the SMC sockets of running goroce programs, as
// smc-tools' smcss lists a Linux host's AF_SMC sockets.
//
// A goroce program's SMC sockets live in its process; programs that
// publish them (smcr.Publish: smcat does) answer on a Unix socket in the
// goroce run directory ($GOROCE_RUN_DIR, else $XDG_RUNTIME_DIR/goroce,
// else /tmp/goroce-UID), and smcss asks each. It believes only a run
// directory of the user's that nobody else may write to, and only sockets
// that a process of the user's serves (others are reported and skipped);
// it removes the sockets of processes that died. Without options it lists
// the connected sockets, SMC-R and fallback ones (Mode "TCP" with Linux's
// fallback reason code, and the peer's when it declined); -a adds the
// listening ones, -l shows only those; -e adds the buffers, token,
// shutdown state and byte counters; -R shows only SMC-R connections, with
// their link: link group, link id, QPNs and GIDs. The columns are smcss's
// where they mean the same; Inode (a goroce socket has none) is replaced
// by the program's PID, and Intf by the goroce device in -R.
//
// Exit status: 0, or 1 if the run directory cannot be read or is not
// trusted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/goroce/goroce/rocev2/device"
	"github.com/goroce/goroce/smcr"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options select what smcss shows.
type options struct {
	all, listening, extended, smcr, wide bool
	dir                                  string
}

func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("smcss", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.all, "a", false, "show all sockets: the listening ones too")
	fs.BoolVar(&o.listening, "l", false, "show only the listening sockets")
	fs.BoolVar(&o.extended, "e", false, "show the buffers, token, shutdown state and byte counters")
	fs.BoolVar(&o.smcr, "R", false, "show only SMC-R connections, with their link group and link")
	fs.BoolVar(&o.wide, "W", false, "do not truncate addresses")
	fs.StringVar(&o.dir, "d", "", "the goroce run `directory` (default $GOROCE_RUN_DIR, else $XDG_RUNTIME_DIR/goroce, else /tmp/goroce-UID)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: smcss [-a | -l] [-e] [-R] [-W] [-d DIR]\n\nThe SMC sockets of running goroce programs (no options: the connected ones).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected operand %q", fs.Arg(0))
	}
	for _, bad := range []struct {
		both bool
		what string
	}{
		{o.listening && o.extended, "-l together with -e"},
		{o.listening && o.all, "-l together with -a"},
		{o.listening && o.smcr, "-l together with -R"},
	} {
		if bad.both {
			return o, fmt.Errorf("%s is not supported", bad.what)
		}
	}
	if o.dir == "" {
		o.dir = device.RunDir()
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "smcss: %v\n", err)
		return 2
	}
	procs, err := gather(o.dir, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "smcss: %v\n", err)
		return 1
	}
	fmt.Fprint(stdout, format(procs, &o))
	return 0
}

// readTimeout bounds how long one process may take to answer.
const readTimeout = 2 * time.Second

// gather reads every publishing process in dir. A socket whose process
// died is skipped quietly (and removed); one that answers something else,
// or that another user serves, is reported.
func gather(dir string, stderr io.Writer) ([]*smcr.Published, error) {
	paths, err := smcr.PublishedPaths(dir)
	if err != nil {
		return nil, fmt.Errorf("read the run directory: %w", err)
	}
	var procs []*smcr.Published
	for _, path := range paths {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		p, err := smcr.ReadPublished(ctx, path)
		cancel()
		switch {
		case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, fs.ErrNotExist):
			continue // its process is gone
		case err != nil:
			fmt.Fprintf(stderr, "smcss: %s\n", printable(err.Error()))
			continue
		}
		procs = append(procs, p)
	}
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].PID < procs[j].PID })
	return procs, nil
}

// printable replaces control characters: an error may quote what another
// process sent.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}
