package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"

	"github.com/goroce/goroce/cmd/internal/cmtool"
	"github.com/goroce/goroce/cmd/internal/getopt"
)

// rping's limits (rping.c): the ping buffer holds the "rdma-ping-N: "
// prefix of the largest count and fits the 64 KiB default buffer.
const (
	minSize     = len("2147483647") + 1 + len("rdma-ping-%d: ") + 1 // RPING_MIN_BUFSIZE
	maxSize     = 64 * 1024                                         // RPING_BUFSIZE
	defaultPort = 7174
	// exitUsage is rping's status for a bad command line (EINVAL).
	exitUsage = 22
	// exitFail is its status after an error (-1 from main or exit(-1)).
	exitFail = 255
)

type config struct {
	server     bool
	addr       netip.Addr // -a
	source     netip.Addr // -I
	port       uint16
	count      int
	size       int
	verbose    bool
	validate   bool
	debug      bool
	persistent bool
	goroce     cmtool.Options
}

var rpingOpts = append([]getopt.Opt{
	{Short: 'a', HasArg: true}, {Short: 'I', HasArg: true}, {Short: 'P'}, {Short: 'p', HasArg: true},
	{Short: 'C', HasArg: true}, {Short: 'S', HasArg: true}, {Short: 't', HasArg: true}, {Short: 's'},
	{Short: 'c'}, {Short: 'v'}, {Short: 'V'}, {Short: 'd'}, {Short: 'q'},
}, cmtool.Opts...)

func usage(w io.Writer) {
	fmt.Fprintf(w, "%s -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n", "rping")
	fmt.Fprintf(w, "%s -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n", "rping")
	fmt.Fprintf(w, "\t-c\t\tclient side\n")
	fmt.Fprintf(w, "\t-I\t\tSource address to bind to for client.\n")
	fmt.Fprintf(w, "\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0\n")
	fmt.Fprintf(w, "\t-v\t\tdisplay ping data to stdout\n")
	fmt.Fprintf(w, "\t-V\t\tvalidate ping data\n")
	fmt.Fprintf(w, "\t-d\t\tdebug printfs\n")
	fmt.Fprintf(w, "\t-S size \tping data size\n")
	fmt.Fprintf(w, "\t-C count\tping count times\n")
	fmt.Fprintf(w, "\t-a addr\t\taddress\n")
	fmt.Fprintf(w, "\t-p port\t\tport\n")
	fmt.Fprintf(w, "\t-P\t\tpersistent server mode allowing multiple connections\n")
	fmt.Fprintf(w, "\t-q\t\tuse self-created, self-modified QP\n")
	fmt.Fprint(w, cmtool.Usage)
}

var errUsage = errors.New("usage")

// getAddr resolves an address as rping's get_addr does (getaddrinfo).
func getAddr(s string, stdout io.Writer) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a, nil
	}
	ips, err := net.LookupIP(s)
	if err != nil || len(ips) == 0 {
		fmt.Fprintf(stdout, "getaddrinfo failed (%v) - invalid hostname or IP address\n", err)
		return netip.Addr{}, errUsage
	}
	a, _ := netip.AddrFromSlice(ips[0])
	return a.Unmap(), nil
}

// parse reads rping's command line (getopt with opterr 0: an unknown
// option prints only the usage).
func parse(args []string, stdout, stderr io.Writer) (*config, error) {
	cfg := &config{size: 64, port: defaultPort}
	side := -1
	p := getopt.Parser{Prog: "rping", Opts: rpingOpts}
	var bad error
	_, err := p.Parse(args, func(i int, val string) error {
		o := rpingOpts[i]
		if o.Short == 0 {
			return cfg.goroce.Set(i-(len(rpingOpts)-len(cmtool.Opts)), val)
		}
		switch o.Short {
		case 'a':
			a, err := getAddr(val, stdout)
			cfg.addr, bad = a, err
		case 'I':
			a, err := getAddr(val, stdout)
			cfg.source, bad = a, err
		case 'P':
			cfg.persistent = true
		case 'p':
			n, _ := strconv.Atoi(val)
			cfg.port = uint16(n)
		case 's':
			side = 1
		case 'c':
			side = 0
		case 'S':
			cfg.size, _ = strconv.Atoi(val)
			if cfg.size < minSize || cfg.size > maxSize-1 {
				fmt.Fprintf(stderr, "Invalid size %d (valid range is %d to %d)\n", cfg.size, minSize, maxSize)
				bad = errUsage
			}
		case 'C':
			cfg.count, _ = strconv.Atoi(val)
			if cfg.count < 0 {
				fmt.Fprintf(stderr, "Invalid count %d\n", cfg.count)
				bad = errUsage
			}
		case 'v':
			cfg.verbose = true
		case 'V':
			cfg.validate = true
		case 'd':
			cfg.debug = true
		case 't', 'q':
			// -t (type of service) and -q (a QP the program moves itself)
			// change nothing on the wire goroce's connection makes.
		}
		return nil
	}, io.Discard)
	if err != nil {
		if !errors.Is(err, getopt.ErrBadOption) && !errors.Is(err, getopt.ErrUsage) {
			fmt.Fprintln(stderr, "rping:", err)
		}
		usage(stdout)
		return nil, errUsage
	}
	if bad != nil {
		return nil, errUsage
	}
	if side == -1 {
		usage(stdout)
		return nil, errUsage
	}
	cfg.server = side == 1
	return cfg, nil
}
