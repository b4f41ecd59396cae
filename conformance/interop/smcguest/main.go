//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
)

const usage = `usage:
  smcguest ueid add NAME | ueid del NAME | ueid list
  smcguest pnet add PNETID ETHDEV IBDEV PORT | pnet del PNETID | pnet list
  smcguest server PORT [-n CONNS] [-shut|-close|-abort] [-peer-abort] [-tcp] [-addr A] [-timeout D]
  smcguest client ADDR PORT [-conns N] [-parallel] [-sizes 1,1k,64k,1m,16m]
                  [-end shut|close|abort] [-idle D] [-peer-abort] [-tcp] [-timeout D]
                  [-hold-at LIST -hold PREFIX]
  smcguest stats [-raw]    SMC statistics and fallback reasons, key=value
  smcguest lgr [-raw]      SMC-R link groups and links, key=value
  smcguest info            SMC version, release, SMC-Rv2 support
  smcguest genl FAMILY     a generic netlink family's ID, version and commands

server: echoes -n connections (default 1) at once, then ends each after the
  peer's EOF with shutdown(SHUT_WR) and close (-shut, default) or close
  (-close); -abort reads one byte and closes with the rest unread.
client: per connection, one message per -sizes entry (default 1,1k,64k),
  each echo checked byte for byte; -end shut (default) | close | abort
  (the last echo left unread at close); -idle D: wait D before the end.
  -peer-abort: the other side aborts. -hold-at 8m,16m -hold /tmp/h: the
  first connection's writer stops after 8 MiB sent, creates /tmp/h.0.reached
  and waits for /tmp/h.0 (the reader reads on), then at 16 MiB (.1).
-tcp: plain TCP instead of AF_SMC. -timeout: the whole run (default 120s).
`

// errUsage marks an error in the command line (exit status 2).
var errUsage = errors.New("usage")

func main() {
	out := &lineWriter{w: os.Stdout}
	err := run(out, os.Args[1:])
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		fmt.Fprintf(os.Stderr, "smcguest: %v\n%s", err, usage)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "smcguest: %v\n", err)
		os.Exit(1)
	}
}

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// run dispatches one command line.
func run(out *lineWriter, args []string) error {
	if len(args) == 0 {
		return usageErr("no command")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		io.WriteString(out.w, usage)
		return nil
	case "ueid":
		return runUEID(out, rest)
	case "pnet":
		return runPnet(out, rest)
	case "server":
		o, err := parseServer(rest)
		if err != nil {
			return usageErr("server: %v", err)
		}
		return runServer(out, o)
	case "client":
		o, err := parseClient(rest)
		if err != nil {
			return usageErr("client: %v", err)
		}
		return runClient(out, o)
	case "stats", "lgr":
		p, err := parseArgs(rest, []optSpec{{"raw", false}})
		if err != nil || len(p.pos) != 0 {
			return usageErr("%s [-raw]", cmd)
		}
		if cmd == "stats" {
			return stats(out.w, p.set["raw"])
		}
		return lgr(out.w, p.set["raw"])
	case "info":
		if len(rest) != 0 {
			return usageErr("info takes no arguments")
		}
		return info(out.w)
	case "genl":
		if len(rest) != 1 {
			return usageErr("genl FAMILY")
		}
		return genlInfo(out.w, rest[0])
	}
	return usageErr("unknown command %q", cmd)
}

func runUEID(out *lineWriter, args []string) error {
	switch {
	case len(args) == 2 && args[0] == "add":
		return ueidAdd(out.w, args[1])
	case len(args) == 2 && args[0] == "del":
		return ueidDel(out.w, args[1])
	case len(args) == 1 && args[0] == "list":
		return ueidList(out.w)
	}
	return usageErr("ueid add NAME | ueid del NAME | ueid list")
}

func runPnet(out *lineWriter, args []string) error {
	switch {
	case len(args) == 5 && args[0] == "add":
		port, err := strconv.Atoi(args[4])
		if err != nil {
			return usageErr("pnet add: port %q is not a number", args[4])
		}
		return pnetAdd(out.w, args[1], args[2], args[3], port)
	case len(args) == 2 && args[0] == "del":
		return pnetDel(out.w, args[1])
	case len(args) == 1 && args[0] == "list":
		return pnetList(out.w)
	}
	return usageErr("pnet add PNETID ETHDEV IBDEV PORT | pnet del PNETID | pnet list")
}

// lineWriter prints whole lines, one write each, from any goroutine: the
// lines of concurrent connections never interleave, and a reader of the
// output file sees every line as soon as it is done.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	s := fmt.Sprintf(format, args...) + "\n"
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.w, s)
}
